#include "dataplane/user_ops/op_plugins.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/sample_fields.h"
#include "glog/logging.h"

namespace stoker {
namespace {

bool DottedName(const char* name) {
  if (name == nullptr) return false;
  const std::string n(name);
  if (n.find('.') == std::string::npos || n.front() == '.' || n.back() == '.') return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok || (c == '.' && n[i + 1] == '.')) return false;
    if ((i == 0 || n[i - 1] == '.') && (c >= '0' && c <= '9')) return false;
  }
  return true;
}

uint64_t NextFromRng(void* state) { return static_cast<Rng*>(state)->Next(); }

// The allocator's host: the image an op makes, bounded by the pixel limit.
struct Made {
  int64_t max_pixels = 0;
  cv::Mat mat;
  StokerImage image{};
};

StokerImage* Allocate(void* host, int32_t height, int32_t width) {
  auto* made = static_cast<Made*>(host);
  if (height < 1 || width < 1 || int64_t{height} * width > made->max_pixels) return nullptr;
  made->mat.create(height, width, CV_8UC3);
  made->image = {made->mat.data, height, width, 3, static_cast<int64_t>(made->mat.step[0])};
  return &made->image;
}

// The fields' host: the values a plugin asked to replace, by index.
struct Replaced {
  std::vector<std::optional<std::string>> values;
};

int32_t Replace(void* host, int32_t index, const uint8_t* data, int64_t size) {
  auto* r = static_cast<Replaced*>(host);
  if (index < 0 || static_cast<size_t>(index) >= r->values.size() || size < 0 || (data == nullptr && size > 0))
    return 1;
  r->values[static_cast<size_t>(index)] = std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(size));
  return 0;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const OpPlugins>> OpPlugins::Load(const std::filesystem::path& dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::InvalidArgumentError(absl::StrCat("--op-plugins ", dir.string(), " is not a directory"));
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".so") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::shared_ptr<OpPlugins> plugins(new OpPlugins());
  for (const auto& file : files) {
    const std::string where = absl::StrCat("op plugin ", file.string());
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, " does not load: ", dlerror()));
    plugins->handles_.push_back(handle);
    auto entry = reinterpret_cast<StokerOpPluginEntry>(dlsym(handle, STOKER_OP_PLUGIN_ENTRY));
    if (entry == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has no ", STOKER_OP_PLUGIN_ENTRY, "() entry point"));
    }
    const StokerPluginInfo* info = entry();
    if (info == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", STOKER_OP_PLUGIN_ENTRY, "() returned null"));
    if (info->abi_version != STOKER_OP_PLUGIN_ABI_VERSION) {
      return absl::InvalidArgumentError(absl::StrCat(where, " was built for op plugin ABI version ", info->abi_version,
                                                     "; this server has version ", STOKER_OP_PLUGIN_ABI_VERSION,
                                                     ": rebuild it against this Stoker"));
    }
    if (info->num_ops < 0 || (info->num_ops > 0 && info->ops == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(where, " lists ", info->num_ops, " ops without a table"));
    }
    for (int i = 0; i < info->num_ops; ++i) {
      const StokerOpInfo& op = info->ops[i];
      if (!DottedName(op.name)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": op '", op.name ? op.name : "(null)",
                                                       "' needs a dotted lower-case name such as team.op"));
      }
      if (op.create == nullptr || op.apply == nullptr || op.destroy == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": op ", op.name, " lacks create, apply or destroy"));
      }
      if (!plugins->ops_.emplace(op.name, &op).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": op ", op.name, " is already registered by another plugin"));
      }
    }
    LOG(INFO) << "op plugin " << file.filename().string() << " (" << (info->name ? info->name : "unnamed")
              << "): " << info->num_ops << " ops";
  }
  return std::shared_ptr<const OpPlugins>(std::move(plugins));
}

OpPlugins::~OpPlugins() {
  for (void* h : handles_) dlclose(h);
}

const StokerOpInfo* OpPlugins::Find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second;
}

std::vector<std::string> OpPlugins::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, unused] : ops_) names.push_back(name);
  return names;
}

absl::StatusOr<std::shared_ptr<const PluginInstance>> PluginInstance::Create(const std::string& where,
                                                                             const v1::PluginOp& op,
                                                                             const UserOps& user) {
  const StokerOpInfo* info = user.plugins ? user.plugins->Find(op.name()) : nullptr;
  if (info == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no op '", op.name(), "' on this server; its plugin ops: ",
                                                   user.plugins && !user.plugins->Names().empty()
                                                       ? absl::StrJoin(user.plugins->Names(), ", ")
                                                       : "none (the operator loads them with --op-plugins DIR)"));
  }
  if (op.has_p() && !(op.p() >= 0 && op.p() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".", op.name(), ".p = ", op.p(), "; allowed range is 0..1"));
  }
  std::vector<std::string> params;
  for (const char* const* p = info->params; p != nullptr && *p != nullptr; ++p) params.emplace_back(*p);
  std::vector<std::string> names;
  std::vector<StokerArgument> args;
  names.reserve(static_cast<size_t>(op.args_size()));
  for (int i = 0; i < op.args_size(); ++i) {
    const v1::OpArgument& a = op.args(i);
    if (a.name().empty() && static_cast<size_t>(i) >= params.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".", op.name(), " takes at most ", params.size(), " positional arguments"));
    }
    names.push_back(a.name().empty() ? params[static_cast<size_t>(i)] : a.name());
  }
  for (int i = 0; i < op.args_size(); ++i) {
    const v1::OpArgument& a = op.args(i);
    StokerArgument s{names[static_cast<size_t>(i)].c_str(), 0, 0, 0, nullptr};
    switch (a.value_case()) {
      case v1::OpArgument::kIntValue: s.type = STOKER_ARG_INT, s.int_value = a.int_value(); break;
      case v1::OpArgument::kFloatValue: s.type = STOKER_ARG_FLOAT, s.float_value = a.float_value(); break;
      case v1::OpArgument::kBoolValue: s.type = STOKER_ARG_BOOL, s.int_value = a.bool_value(); break;
      case v1::OpArgument::kStringValue: s.type = STOKER_ARG_STRING, s.string_value = a.string_value().c_str(); break;
      default: return absl::InvalidArgumentError(absl::StrCat(where, ".", op.name(), ".", names[i], " has no value"));
    }
    args.push_back(s);
  }
  char error[512] = "";
  void* state = info->create(args.data(), static_cast<int32_t>(args.size()), error, sizeof(error));
  if (state == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", op.name(), ": ", error[0] ? error : "the plugin refused its arguments"));
  }
  return std::shared_ptr<const PluginInstance>(new PluginInstance(user.plugins, info, state));
}

PluginInstance::~PluginInstance() { info_->destroy(state_); }

int PluginInstance::OutputSize(int* height, int* width) const {
  if (info_->output_size == nullptr) return STOKER_SIZE_KEEPS;
  int32_t h = 0, w = 0;
  const int32_t kind = info_->output_size(state_, &h, &w);
  *height = h, *width = w;
  return kind;
}

absl::StatusOr<cv::Mat> PluginInstance::Apply(cv::Mat image, Rng& rng, int64_t max_pixels, UserOpIo* io) const {
  if (image.type() != CV_8UC3) {
    return DecodeError(DecodeFailure::kTransform,
                       absl::StrCat(info_->name, " was given an image that is not 8-bit RGB"));
  }
  StokerImage in{image.data, image.rows, image.cols, 3, static_cast<int64_t>(image.step[0])};
  StokerRng generator{&rng, &NextFromRng};
  Made made;
  made.max_pixels = max_pixels;
  StokerAllocator allocator{&made, &Allocate};
  std::vector<StokerField> given;
  Replaced replaced;
  if (io != nullptr) {
    for (const UserOpField& f : io->fields) {
      given.push_back({f.name.c_str(), static_cast<int32_t>(f.kind), reinterpret_cast<const uint8_t*>(f.value->data()),
                       static_cast<int64_t>(f.value->size())});
    }
  }
  replaced.values.resize(given.size());
  StokerFields fields{static_cast<int32_t>(given.size()), given.data(), &replaced, &Replace};
  char error[512] = "";
  if (info_->apply(state_, &in, &generator, &allocator, &fields, error, sizeof(error)) != 0) {
    return DecodeError(DecodeFailure::kTransform,
                       absl::StrCat(info_->name, " failed: ", error[0] ? error : "(no message)"));
  }
  // The replaced fields, checked in full before any is set.
  std::vector<std::string> checked(replaced.values.size());
  for (size_t i = 0; i < replaced.values.size(); ++i) {
    if (!replaced.values[i]) continue;
    absl::StatusOr<std::string> value =
        CheckReplacedField(io->fields[i].kind, *std::move(replaced.values[i]), io->max_field_bytes,
                           absl::StrCat(info_->name, " field '", io->fields[i].name, "'"));
    if (!value.ok()) return value.status();
    checked[i] = *std::move(value);
  }
  for (size_t i = 0; i < replaced.values.size(); ++i) {
    if (replaced.values[i]) *io->fields[i].value = std::move(checked[i]);
  }
  return made.mat.empty() ? image : made.mat;
}

}  // namespace stoker
