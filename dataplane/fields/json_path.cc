#include "dataplane/fields/json_path.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dataplane/decode/image_decoder.h"

namespace stoker {
namespace {

using json = nlohmann::json;

// SAX events in, the tree of the value at the path out. Containers off the
// path are only counted (their depth); the value at the path goes to
// nlohmann's own DOM builder, so its tree is what parse() would build.
class PathSax {
 public:
  explicit PathSax(absl::string_view json_path) {
    for (absl::string_view key : absl::StrSplit(json_path, '.')) {
      keys_.emplace_back(key);
      size_t index = 0;
      indices_.push_back(absl::SimpleAtoi(key, &index) ? std::optional<size_t>(index) : std::nullopt);
    }
  }

  bool null() {
    return Scalar([](auto& dom) { return dom.null(); }, 16);
  }
  bool boolean(bool v) {
    return Scalar([v](auto& dom) { return dom.boolean(v); }, 16);
  }
  bool number_integer(json::number_integer_t v) {
    return Scalar([v](auto& dom) { return dom.number_integer(v); }, 16);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return Scalar([v](auto& dom) { return dom.number_unsigned(v); }, 16);
  }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    return Scalar([v, &text](auto& dom) { return dom.number_float(v, text); }, 16);
  }
  bool string(json::string_t& v) {
    return Scalar([&v](auto& dom) { return dom.string(v); }, 64 + static_cast<int64_t>(v.size()));
  }
  bool binary(json::binary_t& v) {
    return Scalar([&v](auto& dom) { return dom.binary(v); }, 64 + static_cast<int64_t>(v.size()));
  }
  bool start_object(std::size_t n) {
    return Open(/*array=*/false, [n](auto& dom) { return dom.start_object(n); });
  }
  bool start_array(std::size_t n) {
    return Open(/*array=*/true, [n](auto& dom) { return dom.start_array(n); });
  }
  bool end_object() {
    return Close([](auto& dom) { return dom.end_object(); });
  }
  bool end_array() {
    return Close([](auto& dom) { return dom.end_array(); });
  }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    f.key_on_path = f.matched >= 0 && k == keys_[static_cast<size_t>(f.matched)];
    return !capturing() || (Charge(64 + static_cast<int64_t>(k.size())) && dom_->key(k));
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/, const nlohmann::detail::exception& /*e*/) {
    if (failure_ == Failure::kNone) failure_ = Failure::kSyntax;
    return false;
  }

  enum class Failure { kNone, kSyntax, kDepth, kTooLarge };
  Failure failure() const { return failure_; }
  bool found() const { return found_; }
  json& value() { return value_; }
  // The first key of the path that the document lacks.
  const std::string& missing_key() const { return keys_[static_cast<size_t>(best_)]; }

 private:
  struct Frame {
    bool array = false;
    int matched = -1;          // how many keys of the path lead here; -1: off the path
    size_t index = 0;          // an array's next element
    bool key_on_path = false;  // an object's current key is the path's next
  };

  bool capturing() const { return capture_base_ >= 0; }

  // The path length that leads to the value beginning now (-1: off the path).
  int BeginValue() {
    if (frames_.empty()) return 0;
    Frame& f = frames_.back();
    int m = -1;
    if (f.matched >= 0) {
      const std::optional<size_t>& want = indices_[static_cast<size_t>(f.matched)];
      if (f.array ? (want.has_value() && *want == f.index) : f.key_on_path) m = f.matched + 1;
    }
    if (f.array) ++f.index;
    if (m > best_ && m < static_cast<int>(keys_.size())) best_ = m;
    if (m >= 1 && m < static_cast<int>(keys_.size()) && !capturing()) {
      found_ = false;  // a key given again replaces what an earlier one led to
      value_ = json();
    }
    return m;
  }

  // Starts the tree of the value at the path (again, when a key repeats).
  bool MaybeCapture(int matched) {
    if (capturing() || matched != static_cast<int>(keys_.size())) return false;
    value_ = json();
    dom_.emplace(value_, /*allow_exceptions=*/false);
    tree_bytes_ = 0;
    found_ = true;
    return true;
  }

  bool Charge(int64_t bytes) {
    tree_bytes_ += bytes;
    if (tree_bytes_ <= kMaxJsonValueTreeBytes) return true;
    failure_ = Failure::kTooLarge;
    return false;
  }

  template <typename F>
  bool Scalar(F event, int64_t bytes) {
    const bool starts = MaybeCapture(BeginValue());
    if (!capturing() && !starts) return true;
    if (!Charge(bytes) || !event(*dom_)) return false;
    if (starts) dom_.reset();  // a scalar at the path is whole at once
    return true;
  }

  template <typename F>
  bool Open(bool array, F event) {
    if (frames_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      failure_ = Failure::kDepth;
      return false;
    }
    const int matched = BeginValue();
    const bool starts = MaybeCapture(matched);
    if (starts) capture_base_ = static_cast<int>(frames_.size());
    Frame f;
    f.array = array;
    f.matched = capturing() || matched >= static_cast<int>(keys_.size()) ? -1 : matched;
    frames_.push_back(f);
    if (!capturing()) return true;
    return Charge(16) && event(*dom_);
  }

  template <typename F>
  bool Close(F event) {
    frames_.pop_back();
    if (!capturing()) return true;
    if (!event(*dom_)) return false;
    if (static_cast<int>(frames_.size()) == capture_base_) {
      capture_base_ = -1;
      dom_.reset();
    }
    return true;
  }

  std::vector<std::string> keys_;
  std::vector<std::optional<size_t>> indices_;  // keys_ read as array indices
  std::vector<Frame> frames_;                   // the open arrays and objects
  int best_ = 0;                                // most keys matched so far
  int capture_base_ = -1;                       // frames_.size() where the value at the path opened; -1: not inside it
  bool found_ = false;
  json value_;
  std::optional<nlohmann::detail::json_sax_dom_parser<json>> dom_;
  int64_t tree_bytes_ = 0;
  Failure failure_ = Failure::kNone;
};

}  // namespace

absl::StatusOr<json> FindJsonPath(const std::string& bytes, absl::string_view json_path, const std::string& where) {
  PathSax sax(json_path);
  json::sax_parse(bytes, &sax);
  switch (sax.failure()) {
    case PathSax::Failure::kNone: break;
    case PathSax::Failure::kSyntax:
      return DecodeError(DecodeFailure::kBadField, absl::StrCat(where, ": JSON that does not parse"));
    case PathSax::Failure::kDepth:
      return DecodeError(DecodeFailure::kCorrupt,
                         absl::StrCat(where, ": JSON nested deeper than ", kMaxJsonDepth, " arrays and objects"));
    case PathSax::Failure::kTooLarge:
      return DecodeError(DecodeFailure::kTooLarge,
                         absl::StrCat(where, ": the JSON value at path '", json_path, "' would take more than ",
                                      kMaxJsonValueTreeBytes >> 20, " MiB as a tree"));
  }
  if (!sax.found()) {
    return DecodeError(DecodeFailure::kBadField, absl::StrCat(where, ": JSON without the path '", json_path,
                                                              "' (stops at '", sax.missing_key(), "')"));
  }
  return std::move(sax.value());
}

}  // namespace stoker
