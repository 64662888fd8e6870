#!/usr/bin/env bash
# The shipped operator artifacts are valid: promtool check config / check
# rules / test rules, and every Grafana dashboard loads as JSON with a query
# in every panel (tests/bottleneck_test.py runs those queries live).
# Usage: deploy_config_test.sh DEPLOY_DIR
set -uo pipefail
deploy=$1
passed=0 failed=0
check() {  # NAME COMMAND...
  local name=$1; shift
  if out=$("$@" 2>&1); then
    echo "ok: $name"; passed=$((passed + 1))
  else
    echo "FAIL: $name"; echo "$out"; failed=$((failed + 1))
  fi
}
check "promtool check config" promtool check config "$deploy/prometheus/prometheus.yml"
check "promtool check rules" promtool check rules "$deploy/prometheus/recording_rules.yml" "$deploy/prometheus/alerting_rules.yml"
check "promtool test rules" sh -c "cd '$deploy/prometheus/tests' && promtool test rules rules_test.yml"
dash_rules=$(mktemp --suffix=.yml)
check "dashboards are JSON with a query per panel (rows group them)" /usr/bin/python3 - "$deploy/grafana/dashboards" "$dash_rules" <<'PY'
import json, os, sys
d = sys.argv[1]
names = sorted(os.listdir(d))
assert {"overview.json", "servers.json", "clients.json"} <= set(names), names
rules = []
for n in names:
    dash = json.load(open(os.path.join(d, n)))
    assert dash["panels"], n
    for p in dash["panels"]:
        if p["type"] == "row":
            continue
        assert p["targets"] and all(t["expr"].strip() for t in p["targets"]), (n, p["title"])
        for t in p["targets"]:
            expr = t["expr"].replace("$__rate_interval", "1m").replace("$job", ".*").replace("$instance", ".*")
            rules.append(f"      - record: dashboard:query{len(rules)}\n        expr: {json.dumps(expr)}\n")
    assert [v["name"] for v in dash["templating"]["list"]], n
with open(sys.argv[2], "w") as f:
    f.write("groups:\n  - name: dashboards\n    rules:\n" + "".join(rules))
PY
check "every dashboard query parses as PromQL (promtool)" promtool check rules "$dash_rules"
rm -f "$dash_rules"
check "grafana provisioning files parse" /usr/bin/python3 -c "
import sys
for f in sys.argv[1:]:
    text = open(f).read()
    assert 'apiVersion: 1' in text, f
" "$deploy/grafana/provisioning/datasources/prometheus.yml" "$deploy/grafana/provisioning/dashboards/stoker.yml"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
