// The C++ API's throughput (stoker/client.h over libstoker_client.so), for
// tests/bench/cpp_api_bench.py: batches from the options given as
// name=value, the first `--warmup` untimed, then `--batches` timed; prints
// "images/s RATE". Built like a user's program: the header and the library.
//
//   stoker-cpp-api-bench --warmup 3 --batches 30 servers=... dataset=... batch_size=256
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "stoker/client.h"

int main(int argc, char** argv) {
  stoker::ClientOptions options;
  long warmup = 3, batches = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && (arg == "--warmup" || arg == "--batches")) {
      (arg == "--warmup" ? warmup : batches) = std::strtol(argv[++i], nullptr, 10);
      continue;
    }
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || !options.Set(arg.substr(0, eq), arg.substr(eq + 1))) {
      std::cerr << "stoker-cpp-api-bench: '" << arg << "' is not name=value for an option\n";
      return 2;
    }
  }
  auto client = stoker::Client::Open(options);
  if (!client.ok()) {
    std::cerr << "stoker-cpp-api-bench: " << client.status().message() << "\n";
    return 1;
  }
  std::chrono::steady_clock::time_point start;
  long done = 0, images = 0;
  while (done < warmup + batches) {
    auto b = (*client)->Next();
    if (!b.ok()) {
      std::cerr << "stoker-cpp-api-bench: " << b.status().message() << "\n";
      return 1;
    }
    if (!*b) continue;  // an epoch's end: the next call starts the next epoch
    ++done;
    if (done == warmup) start = std::chrono::steady_clock::now();
    if (done > warmup) images += static_cast<long>((*b)->size());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "images/s " << images / seconds << "\n";
  return 0;
}
