// Sample fields: the fields text parser (any text parses into fields that
// pass CheckFields and print back to text that parses the same, or is
// refused), and the value checks of each kind (UTF-8, JSON, class ids) on
// any bytes, and ExtractJsonField's key paths (a first byte with its top bit
// set: the path up to the first newline, the document after it). Must never
// crash, hang or overflow the stack (deep JSON). A first byte of 0x7F
// gives the rest to the tokenizer's model check (CheckSentencePieceModel).
#include <cstdint>
#include <string>

#include "common/field_spec.h"
#include "dataplane/fields/sample_fields.h"
#include "dataplane/fields/tokenizer.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto kind = static_cast<stoker::v1::FieldKind>(1 + data[0] % 6);
  if (data[0] == 0x7F) {  // a tokenizer file: its shape is checked before SentencePiece sees it
    (void)stoker::CheckSentencePieceModel(bytes);
    return 0;
  }
  if (data[0] & 0x80) {
    const size_t newline = bytes.find('\n');
    const std::string path = newline == std::string::npos ? "a" : bytes.substr(0, newline);
    const std::string doc = newline == std::string::npos ? bytes : bytes.substr(newline + 1);
    static constexpr stoker::v1::FieldKind kPathKinds[] = {stoker::v1::CLASS, stoker::v1::CLASSES, stoker::v1::TEXT,
                                                           stoker::v1::JSON,  stoker::v1::NUMBER,  stoker::v1::BYTES};
    const stoker::v1::FieldKind path_kind = kPathKinds[data[0] % 6];
    auto value = stoker::ExtractJsonField(path_kind, doc, path, "fuzz");
    if (value.ok() && (path_kind == stoker::v1::CLASS || path_kind == stoker::v1::NUMBER) && value->size() != 4) {
      __builtin_trap();  // one 32-bit value
    }
    if (value.ok() && path_kind == stoker::v1::JSON && !nlohmann::json::accept(*value)) __builtin_trap();
    return 0;
  }
  if (kind != stoker::v1::IMAGE) {
    auto value = stoker::EncodeFieldValue(kind, bytes, "fuzz");
    if (value.ok() && (kind == stoker::v1::TEXT || kind == stoker::v1::JSON || kind == stoker::v1::BYTES) &&
        *value != bytes) {
      __builtin_trap();  // pass-through kinds keep every byte
    }
    if (value.ok() && (kind == stoker::v1::CLASS || kind == stoker::v1::CLASSES) && value->size() % 4 != 0) {
      __builtin_trap();
    }
  }
  auto fields = stoker::ParseFieldsText(bytes);
  if (!fields.ok()) return 0;
  stoker::v1::SessionConfig config;
  for (const auto& f : *fields) *config.add_fields() = f;
  if (!stoker::CheckFields(config, 0).ok()) __builtin_trap();
  auto again = stoker::ParseFieldsText(stoker::FieldsToText(config.fields()));
  if (!again.ok() || again->size() != fields->size()) __builtin_trap();
  for (size_t i = 0; i < fields->size(); ++i) {
    if ((*again)[i].SerializeAsString() != (*fields)[i].SerializeAsString()) __builtin_trap();
  }
  return 0;
}
