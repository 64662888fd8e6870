// For the objects of Debian bookworm's static libarchive
// (materialize/CMakeLists.txt). arc4random_buf: glibc has it only from 2.36, and the
// packages promise glibc 2.34. Filled from the kernel's getrandom(2), which
// is what glibc's own arc4random_buf does.
#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>

extern "C" void arc4random_buf(void* buf, size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::abort();  // as glibc's: no randomness is not an error to return
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

// The pax writer's one call into archive_write_set_format.o, whose table of
// every format would pull in the xar and 7-Zip writers (libxml2, ICU, and
// the crypto libraries) for a tar of regular files: the same error, here.
#include <archive.h>
#include <archive_entry.h>

extern "C" void __archive_write_entry_filetype_unsupported(struct archive* a, struct archive_entry* entry,
                                                           const char* format) {
  archive_set_error(a, EINVAL, "%s: unsupported file type for %s", archive_entry_pathname(entry), format);
}
