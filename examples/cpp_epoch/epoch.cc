// Epochs through Stoker's C++ API (stoker/client.h), the C example's twin:
// options from the command line as name=value, every batch's sample
// indices printed, the run's statistics at the end. It uses the header and
// libstoker_client.so only, so it builds with any standard library ABI
// (the tests build it with -D_GLIBCXX_USE_CXX11_ABI=0 too).
//
//   epoch [--epochs N] name=value...
//
// Output: "batch EPOCH INDEX SIZE: i0 i1 ..." per batch, "images N" per
// epoch, then "stats {json}". Exit status 0, or 1 with the message.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "stoker/client.h"

namespace {

int Fail(const std::string& what, const stoker::Status& status) {
  std::cerr << "epoch: " << what << ": " << status.message() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  stoker::ClientOptions options;
  long epochs = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--epochs" && i + 1 < argc) {
      epochs = std::strtol(argv[++i], nullptr, 10);
      continue;
    }
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || !options.Set(arg.substr(0, eq), arg.substr(eq + 1))) {
      std::cerr << "epoch: '" << arg << "' is not name=value for an option\n";
      return 2;
    }
  }
  auto client = stoker::Client::Open(options);
  if (!client.ok()) return Fail("open", client.status());
  for (long epoch = 0; epoch < epochs; ++epoch) {
    if (stoker::Status s = (*client)->SetEpoch(epoch); !s.ok()) return Fail("set_epoch", s);
    long images = 0;
    while (true) {
      auto batch = (*client)->Next();
      if (!batch.ok()) return Fail("next", batch.status());
      if (!*batch) break;  // the epoch's end
      const stoker::Batch& b = **batch;
      if (b.image().ndim < 1 || b.image().shape[0] != b.size()) {
        std::cerr << "epoch: an image tensor that does not hold the batch\n";
        return 1;
      }
      std::cout << "batch " << b.epoch() << " " << b.index() << " " << b.size() << ":";
      for (int64_t k = 0; k < b.size(); ++k) std::cout << " " << b.sample_indices()[k];
      std::cout << "\n";
      images += static_cast<long>(b.size());
    }
    std::cout << "images " << images << "\n";
  }
  auto stats = (*client)->StatsJson();
  if (!stats.ok()) return Fail("stats", stats.status());
  std::cout << "stats " << *stats << "\n";
  return 0;
}
