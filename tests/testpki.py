"""Certificates for the security tests and the TLS benchmark, made with the
openssl tool: two CAs ("ca", "otherca"), server certificates for localhost /
127.0.0.1 ("server", and "server2" for rotation), client certificates
("client-a", "client-b" from ca; "client-other" from otherca;
"client-expired", valid for one day in 2020). EC P-256 keys, 2-day validity.
"""
import os
import subprocess


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Pki:
    """Two CAs and the certificates the scenarios use, made with openssl."""

    def __init__(self, d):
        self.d = d
        os.makedirs(d)
        for ca in ("ca", "otherca"):
            openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2", "-subj", f"/CN={ca} test", cwd=d)
        with open(os.path.join(d, "san.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        self.issue("server", "stoker-server", "ca", ext="san.ext")
        self.issue("server2", "stoker-server-rotated", "ca", ext="san.ext")
        self.issue("client-a", "trainer-a", "ca")
        self.issue("client-b", "trainer-b", "ca")
        self.issue("client-other", "trainer-a", "otherca")
        self.issue_expired("client-expired", "trainer-a")

    def path(self, name):
        return os.path.join(self.d, name)

    def csr(self, name, cn):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=self.d)

    def issue(self, name, cn, ca, ext=None):
        self.csr(name, cn)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", *(["-extfile", ext] if ext else []), cwd=self.d)

    def issue_expired(self, name, cn):
        # `openssl ca` takes explicit dates: valid for one day in 2020.
        self.csr(name, cn)
        with open(self.path("ca.cnf"), "w") as f:
            f.write("[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n"
                    "default_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n")
        open(self.path("index.txt"), "w").close()
        with open(self.path("serial"), "w") as f:
            f.write("1000\n")
        openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key", "-in", f"{name}.csr",
                "-out", f"{name}.pem", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-notext",
                cwd=self.d)

    def client(self, name):
        return [f"--tls-ca={self.path('ca.pem')}", f"--tls-cert={self.path(name + '.pem')}",
                f"--tls-key={self.path(name + '.key')}"]
