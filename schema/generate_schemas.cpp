// mme_generate_schemas SOURCE_DIR OUT_DIR: the published JSON Schemas, as the build stages them
// (stage/share/mme/schema, installed to share/mme/schema; docs/cli.md, "Contracts").
//
//   - spec-file.schema.json and setup.schema.json are generated from the tables
//     (mme::spec_file_json_schema(), mme::setup_block_json_schema());
//   - every hand-written SOURCE_DIR/*.schema.json is copied, with a `$defs` entry that says
//     {"x-mme-generated": "setup.schema.json"} replaced by the generated setup block, so each
//     installed schema stands alone (no reference to another file to resolve).
//
// A hand-written schema whose `$id` is not schema_id(<its file name>) or whose `schema_version`
// is not kSchemaVersion fails the build.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <mme/inputs/json_schema.hpp>

namespace fs = std::filesystem;
using OJ = nlohmann::ordered_json;

namespace {

OJ read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return OJ::parse(ss.str());
}

void write_json(const fs::path& file, const OJ& j) {
  std::ofstream out(file, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

// The generated setup block as a `$defs` entry: the same schema without the keywords of a
// document of its own.
OJ setup_definition() {
  OJ s = mme::setup_block_json_schema();
  for (const char* k : {"$schema", "$id", "schema_version"}) s.erase(k);
  return s;
}

void bundle(OJ& node, const OJ& setup) {
  if (!node.is_object() && !node.is_array()) return;
  if (node.is_object()) {
    if (auto it = node.find("x-mme-generated"); it != node.end()) {
      if (*it != "setup.schema.json") throw std::runtime_error("unknown generated schema " + it->dump());
      node = setup;
      return;
    }
  }
  for (auto& child : node) bundle(child, setup);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: mme_generate_schemas SOURCE_DIR OUT_DIR\n";
    return 2;
  }
  try {
    const fs::path source = argv[1], out = argv[2];
    fs::create_directories(out);
    const OJ setup = setup_definition();
    std::vector<fs::path> sources;
    for (const auto& e : fs::directory_iterator(source)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 12 && name.ends_with(".schema.json")) sources.push_back(e.path());
    }
    for (const auto& file : sources) {
      const std::string name = file.filename().string();
      if (name == "spec-file.schema.json" || name == "setup.schema.json")
        throw std::runtime_error(name + " is generated: it cannot be written by hand");
      OJ j = read_json(file);
      if (j.value("$id", "") != mme::schema_id(name))
        throw std::runtime_error(file.string() + ": $id must be " + mme::schema_id(name));
      if (j.value("schema_version", 0) != mme::kSchemaVersion)
        throw std::runtime_error(file.string() + ": schema_version must be " + std::to_string(mme::kSchemaVersion));
      bundle(j, setup);
      write_json(out / name, j);
    }
    write_json(out / "spec-file.schema.json", mme::spec_file_json_schema());
    write_json(out / "setup.schema.json", mme::setup_block_json_schema());
  } catch (const std::exception& e) {
    std::cerr << "mme_generate_schemas: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
