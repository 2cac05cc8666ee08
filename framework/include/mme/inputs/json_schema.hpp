// The JSON Schemas (draft 2020-12) that follow from the tables, so a new knob or spec field
// appears in them without editing a schema by hand:
//   - spec files (spec-file.schema.json): every field of spec_fields(), its type, range, values
//     (every spelling the reader accepts, ignoring case), null for the optional ones, the
//     required ones (model fields only without `hf`);
//   - the JSON `setup` block of `estimate --json` and `plan --json` (setup.schema.json): every
//     knob's JSON key with the values its writer produces, and the derived dp, expert_dp and
//     num_micro_batches.
// The hand-written schemas of the other documents are in schema/ (docs/cli.md, "Contracts");
// schema/generate_schemas.cpp writes these two and bundles the setup block into the others.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mme {

// The major version of the documents and of their schemas: every schema carries it as
// `schema_version` and every output document as its `schema_version` field. It is bumped when a
// field is removed or renamed or changes its meaning or unit; adding a field does not bump it.
inline constexpr int kSchemaVersion = 1;

// The `$id` of a published schema: "https://megatron-memory-estimator.invalid/schema/v1/<file>".
// (`.invalid` never resolves: the schemas are installed, not served; share/mme/schema holds them.)
std::string schema_id(std::string_view file);

nlohmann::ordered_json spec_file_json_schema();
nlohmann::ordered_json setup_block_json_schema();

// What `mme init` names in its `# yaml-language-server: $schema=...` line: the installed
// spec-file schema next to the executable (<exe>/../share/mme/schema/spec-file.schema.json) as a
// file:// URI when it is there, else its `$id`.
std::string spec_file_schema_reference();

}  // namespace mme
