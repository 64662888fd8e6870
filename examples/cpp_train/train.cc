// A libtorch training loop fed by Stoker's C++ client (stoker/client.h):
// uint8 NHWC batches from data servers and/or local workers wrapped as
// tensors without a copy (torch::from_blob on the batch's slot, on the GPU
// when the batch is there), converted to float on the device, a small
// network trained for the asked-for epochs; a checkpoint holds the model and
// the loader's state, and --resume continues from it with exactly the
// batches the run had not yet trained on.
//
//   stoker_train [--epochs 2] [--checkpoint DIR] [--stop-after N] [--resume]
//                [--classes K] name=value...       (the client's options)
//
// Output per batch: "batch EPOCH INDEX: LOSS i0 i1 ..."; per epoch: "epoch E
// mean loss L". --stop-after N checkpoints after N batches and exits (as a
// preempted job would); --resume loads DIR's checkpoint first.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "stoker/client.h"

namespace {

struct Net : torch::nn::Module {
  explicit Net(int classes)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).stride(2)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).stride(2)))),
        fc(register_module("fc", torch::nn::Linear(16, classes))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv1->forward(x));
    x = torch::relu(conv2->forward(x));
    return fc->forward(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc;
};

// The batch's images as a float NCHW tensor on its device: the slot wrapped
// as it is (no copy), then converted where it lives.
torch::Tensor Images(const stoker::Batch& batch) {
  const stoker_tensor t = batch.image();
  if (t.dtype != STOKER_UINT8 || t.ndim != 4) {  // the conversion below is uint8 images'
    std::cerr << "stoker_train: give dtype=uint8 (the images are converted on the device)\n";
    std::exit(2);
  }
  const auto device = t.device >= 0 ? torch::Device(torch::kCUDA, t.device) : torch::Device(torch::kCPU);
  torch::Tensor slot = torch::from_blob(t.data, {t.shape[0], t.shape[1], t.shape[2], t.shape[3]},
                                        torch::TensorOptions().dtype(torch::kUInt8).device(device));
  if (t.layout == STOKER_NHWC) slot = slot.permute({0, 3, 1, 2});
  return slot.to(torch::kFloat32).div(255);  // a new tensor: the slot may go back
}

int Fail(const std::string& what, const stoker::Status& s) {
  std::cerr << "stoker_train: " << what << ": " << s.message() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  stoker::ClientOptions options;
  long epochs = 2, stop_after = -1, classes = 10;
  bool resume = false;
  std::string checkpoint = "checkpoint";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && (arg == "--epochs" || arg == "--stop-after" || arg == "--classes")) {
      (arg == "--epochs" ? epochs : arg == "--stop-after" ? stop_after : classes) = std::strtol(argv[++i], nullptr, 10);
    } else if (i + 1 < argc && arg == "--checkpoint") {
      checkpoint = argv[++i];
    } else if (arg == "--resume") {
      resume = true;
    } else if (size_t eq = arg.find('=');
               eq == std::string::npos || !options.Set(arg.substr(0, eq), arg.substr(eq + 1))) {
      std::cerr << "stoker_train: '" << arg << "' is not name=value for an option\n";
      return 2;
    }
  }
  torch::manual_seed(1);
  torch::set_num_threads(1);  // the same sums in the same order: a resumed run's losses are the uninterrupted run's
  auto client = stoker::Client::Open(options);
  if (!client.ok()) return Fail("open", client.status());
  auto model = std::make_shared<Net>(static_cast<int>(classes));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
  long first_epoch = 0;
  if (resume) {  // the model, where the loader stood, and the epoch it was in
    torch::load(model, checkpoint + "/model.pt");
    std::ifstream in(checkpoint + "/loader.state", std::ios::binary);
    const std::string state((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (stoker::Status s = (*client)->Restore(state); !s.ok()) return Fail("restore", s);
    first_epoch = (*client)->epoch();  // the epoch the state was saved in
  }
  long trained = 0;
  for (long epoch = first_epoch; epoch < epochs; ++epoch) {
    if (stoker::Status s = (*client)->SetEpoch(epoch); !s.ok()) return Fail("set_epoch", s);
    double loss_sum = 0;
    long steps = 0;
    while (true) {
      if (trained == stop_after) {  // checkpoint: the model and the loader's state, then stop
        auto state = (*client)->State();
        if (!state.ok()) return Fail("state", state.status());
        torch::save(model, checkpoint + "/model.pt");
        std::ofstream(checkpoint + "/loader.state", std::ios::binary) << *state;
        std::cout << "checkpoint after " << trained << " batches" << std::endl;
        return 0;
      }
      auto batch = (*client)->Next();
      if (!batch.ok()) return Fail("next", batch.status());
      if (!*batch) break;  // the epoch's end
      const stoker::Batch& b = **batch;
      const torch::Tensor x = Images(b);
      const torch::Tensor y =
          torch::from_blob(const_cast<int32_t*>(b.labels()), {b.size()}, torch::kInt32).to(x.device(), torch::kLong);
      optimizer.zero_grad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      optimizer.step();
      const double value = loss.item<double>();
      loss_sum += value;
      ++steps;
      ++trained;
      std::printf("batch %ld %ld: %.6f", static_cast<long>(b.epoch()), static_cast<long>(b.index()), value);
      for (int64_t k = 0; k < b.size(); ++k) std::printf(" %ld", static_cast<long>(b.sample_indices()[k]));
      std::printf("\n");
      std::fflush(stdout);
    }
    std::printf("epoch %ld mean loss %.6f over %ld batches\n", epoch, steps ? loss_sum / steps : 0.0, steps);
  }
  auto stats = (*client)->StatsJson();
  if (stats.ok()) std::printf("stats %s\n", stats->c_str());
  return 0;
}
