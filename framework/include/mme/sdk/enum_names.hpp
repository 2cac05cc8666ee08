// The names of the enums of a TrainingSetup: one table per enum, backing to_string()
// (training_setup.hpp) and every parser of the setup schema (mme/inputs/setup_schema.hpp).
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace mme {

// One spelling of an enum value. The first spelling of a value that is not an alias is the one
// printed (to_string); aliases are accepted wherever the value is.
struct EnumName {
  const char* name;
  int value;
  bool alias = false;
};
using EnumTable = std::span<const EnumName>;

// One table per enum: to_string() and the parsers of training_setup.hpp read these.
extern const EnumTable kPrecisionNames;
extern const EnumTable kDTypeNames;
extern const EnumTable kAttentionBackendNames;
extern const EnumTable kTokenDispatcherNames;
extern const EnumTable kFlexBackendNames;    // deepep | hybridep
extern const EnumTable kCudaGraphImplNames;  // none | local | transformer_engine
extern const EnumTable kCpCommTypeNames;
extern const EnumTable kRecomputeGranularityNames;
extern const EnumTable kRecomputeMethodNames;
extern const EnumTable kFsdpShardingNames;
extern const EnumTable kFsdpKindNames;
extern const EnumTable kTransformerImplNames;      // transformer_engine (1) | local (0)
extern const EnumTable kCrossEntropyImplNames;     // native (0) | te (1)
extern const EnumTable kOptimizerNames;            // adam | sgd | muon
extern const EnumTable kFp8RecipeNames;            // delayed | tensorwise | blockwise | mxfp8
extern const EnumTable kFp8FormatNames;            // e4m3 | hybrid
extern const EnumTable kLoraDropoutPositionNames;  // pre | post

// The printed spelling of `value` ("?" when the table has none).
const char* enum_name(EnumTable table, int value);
// The value of `text` (ignoring case, aliases included), or nullopt.
std::optional<int> enum_value(EnumTable table, std::string_view text);

}  // namespace mme
