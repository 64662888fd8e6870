// Epochs through Stoker's C++ API (stoker/client.h), the C example's twin:
// options from the command line as name=value, every batch's sample
// indices printed, the run's statistics at the end. It uses the header and
// libstoker_client.so only, so it builds with any standard library ABI
// (the tests build it with -D_GLIBCXX_USE_CXX11_ABI=0 too).
//
//   epoch [--epochs N] [--first-epoch E] [--restore FILE]
//         [--stop-after B --save-state FILE] [--print-field NAME] name=value...
//
// --restore continues from a state saved by --save-state (in its epoch,
// whatever --first-epoch says), which is written
// after B batches (the program then stops, as a job checkpointing and
// exiting would). Output: "batch EPOCH INDEX SIZE: i0 i1 ..." per batch
// (flushed at once), "field NAME SAMPLE: VALUE" per sample with
// --print-field (a text field's value), "images N" per epoch, then "stats {json}". Exit status
// 0, or 1 with the message.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
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
  long epochs = 1, first_epoch = 0, stop_after = -1;
  std::string restore, save, print_field;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && (arg == "--epochs" || arg == "--first-epoch" || arg == "--stop-after")) {
      (arg == "--epochs"        ? epochs
       : arg == "--first-epoch" ? first_epoch
                                : stop_after) = std::strtol(argv[++i], nullptr, 10);
      continue;
    }
    if (i + 1 < argc && (arg == "--restore" || arg == "--save-state" || arg == "--print-field")) {
      (arg == "--restore" ? restore : arg == "--save-state" ? save : print_field) = argv[++i];
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
  if (!restore.empty()) {
    std::ifstream in(restore, std::ios::binary);
    const std::string state((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (stoker::Status s = (*client)->Restore(state); !s.ok()) return Fail("restore", s);
    first_epoch = (*client)->epoch();  // the saved epoch continues
  }
  long taken = 0;
  for (long epoch = first_epoch; epoch < first_epoch + epochs; ++epoch) {
    if (stoker::Status s = (*client)->SetEpoch(epoch); !s.ok()) return Fail("set_epoch", s);
    long images = 0;
    while (true) {
      if (taken == stop_after) {  // a checkpoint, then stop
        auto state = (*client)->State();
        if (!state.ok()) return Fail("state", state.status());
        std::ofstream(save, std::ios::binary) << *state;
        std::cout << "saved after " << taken << " batches" << std::endl;
        return 0;
      }
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
      std::cout << std::endl;
      if (!print_field.empty()) {
        const std::optional<stoker_field> f = b.field(print_field);
        if (!f) return Fail("field", stoker::Status(STOKER_NOT_FOUND, "no field " + print_field));
        for (int64_t k = 0; k < b.size(); ++k) {
          const char* text = static_cast<const char*>(f->values) + f->offsets[k];
          std::cout << "field " << print_field << " " << b.sample_indices()[k] << ": "
                    << std::string(text, static_cast<size_t>(f->offsets[k + 1] - f->offsets[k])) << "\n";
        }
      }
      images += static_cast<long>(b.size());
      ++taken;
    }
    std::cout << "images " << images << "\n";
  }
  auto stats = (*client)->StatsJson();
  if (!stats.ok()) return Fail("stats", stats.status());
  std::cout << "stats " << *stats << "\n";
  return 0;
}
