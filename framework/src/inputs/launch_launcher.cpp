// The commands that launch an entry script (launch_shell.hpp): torchrun, python -m
// torch.distributed.run, srun, mpirun, deepspeed, wrappers (uv run, nsys, numactl, ...), bash -c
// and sbatch scripts of their own; the GPU count their options give.

#include <algorithm>
#include <cctype>
#include <functional>

#include "mme/inputs/setup_schema.hpp"

#include "launch_shell.hpp"

namespace mme::launch {

namespace {

bool is_python(const std::string& b) {
  if (b.rfind("python", 0) != 0) return false;
  const std::string rest = b.substr(6);
  return std::all_of(rest.begin(), rest.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
}

// An option word: "--name=value", "--name", "-x".
bool is_option(const Str& s) { return s.known() && s.text.size() > 1 && s.text[0] == '-'; }

std::string dashes(std::string t) {
  std::replace(t.begin(), t.end(), '_', '-');
  return t;
}

// Skips a launcher's options from f[k]: `arity(name)` says how many words an option takes
// (written --name=value it takes none); `seen(name, value)` gets each. Returns the index of
// the first word that is not an option.
std::size_t skip_options(const std::vector<Str>& f, std::size_t k, const std::function<int(const std::string&)>& arity,
                         const std::function<void(const std::string&, const Str&)>& seen) {
  while (k < f.size() && is_option(f[k])) {
    const std::string& t = f[k].text;
    if (t == "--") return k + 1;
    if (const auto eq = t.find('='); eq != std::string::npos && t[1] == '-') {
      seen(t.substr(0, eq), Str::of(t.substr(eq + 1)));
      ++k;
      continue;
    }
    const auto n = static_cast<std::size_t>(arity(t));
    seen(t, n > 0 && k + 1 < f.size() ? f[k + 1] : Str::of(""));
    k += 1 + n;
  }
  return std::min(k, f.size());
}

// The GPU counts a launcher's options give.
struct Counts {
  std::optional<Str> nproc, nnodes;           // torchrun
  std::optional<Str> ds_gpus, ds_nodes;       // deepspeed
  std::optional<Str> tasks, nodes, per_node;  // srun, mpirun
  std::string torchrun, tasks_from;
  bool deepspeed = false;
};

// Skips the options of a launcher that runs what follows them (torchrun, python -m
// torch.distributed.run, srun, mpirun, deepspeed, env, wrappers such as uv run or numactl) from
// fields[k], the launcher's own word: the index of the first word after its options, with the GPU
// counts and environment variables they give; k itself for a word that is no such launcher.
std::size_t skip_launcher(const std::string& b, const std::vector<Str>& fields, std::size_t k, Counts& counts,
                          std::vector<std::pair<std::string, Str>>& env) {
  if (b == "torchrun" || b == "torch.distributed.run" || b == "torch.distributed.launch") {
    counts.torchrun = b == "torchrun" ? b : "python -m " + b;
    static const std::set<std::string> switches = {"--standalone", "--no-python", "--run-path",
                                                   "-m",           "--module",    "--use-env"};
    k = skip_options(
        fields, k + 1, [](const std::string& t) { return switches.count(dashes(t)) ? 0 : 1; },
        [&](const std::string& name, const Str& v) {
          if (dashes(name) == "--nproc-per-node") counts.nproc = v;
          if (dashes(name) == "--nnodes") counts.nnodes = v;
        });
    return k;
  }
  if (b == "srun") {
    static const std::set<std::string> long_values = {"--ntasks",
                                                      "--nodes",
                                                      "--ntasks-per-node",
                                                      "--gpus-per-node",
                                                      "--gpus",
                                                      "--partition",
                                                      "--account",
                                                      "--time",
                                                      "--job-name",
                                                      "--output",
                                                      "--error",
                                                      "--mpi",
                                                      "--container-image",
                                                      "--container-mounts",
                                                      "--container-workdir",
                                                      "--cpus-per-task",
                                                      "--mem",
                                                      "--gres",
                                                      "--nodelist",
                                                      "--exclude",
                                                      "--export",
                                                      "--cpu-bind",
                                                      "--distribution",
                                                      "--dependency",
                                                      "--reservation",
                                                      "--qos",
                                                      "--constraint",
                                                      "--chdir"};
    static const std::set<std::string> short_switches = {"-l", "-u", "-K", "-k", "-Q", "-v", "-X",
                                                         "-Z", "-E", "-H", "-O", "-s", "-h"};
    k = skip_options(
        fields, k + 1,
        [](const std::string& t) {
          if (t.rfind("--", 0) == 0) return long_values.count(t) ? 1 : 0;
          return short_switches.count(t) || t.size() > 2 ? 0 : 1;  // -N2: the value attached
        },
        [&](const std::string& name, const Str& v) {
          if (name == "-n" || name == "--ntasks") counts.tasks = v;
          if (name == "-N" || name == "--nodes") counts.nodes = v;
          if (name == "--ntasks-per-node") counts.per_node = v;
          if (name.size() > 2 && (name.rfind("-n", 0) == 0 || name.rfind("-N", 0) == 0))
            (name[1] == 'n' ? counts.tasks : counts.nodes) = Str::of(name.substr(2));
        });
    counts.tasks_from = "srun";
    return k;
  }
  if (b == "mpirun" || b == "mpiexec") {
    static const std::set<std::string> switches = {"--allow-run-as-root",
                                                   "--oversubscribe",
                                                   "--tag-output",
                                                   "-tag-output",
                                                   "--report-bindings",
                                                   "--display-map",
                                                   "-q",
                                                   "--quiet",
                                                   "-v"};
    k = skip_options(
        fields, k + 1,
        [](const std::string& t) { return switches.count(t)               ? 0
                                          : (t == "--mca" || t == "-mca") ? 2
                                                                          : 1; },
        [&](const std::string& name, const Str& v) {
          if (name == "-np" || name == "-n" || name == "--np" || name == "-c") counts.tasks = v;
          if (name == "-x" && v.known() && v.text.find('=') != std::string::npos)
            env.emplace_back(v.text.substr(0, v.text.find('=')), Str::of(v.text.substr(v.text.find('=') + 1)));
        });
    counts.tasks_from = b;
    return k;
  }
  if (b == "deepspeed") {
    counts.deepspeed = true;
    k = skip_options(
        fields, k + 1, [](const std::string& t) { return t == "--no_python" || t == "--no_local_rank" ? 0 : 1; },
        [&](const std::string& name, const Str& v) {
          if (dashes(name) == "--num-gpus") counts.ds_gpus = v;
          if (dashes(name) == "--num-nodes") counts.ds_nodes = v;
        });
    return k;
  }
  if (b == "env") {
    for (++k; k < fields.size(); ++k) {
      const Str& e = fields[k];
      const auto eq = e.text.find('=');
      if (e.known() && (e.text == "-i" || e.text == "-")) continue;
      if (e.known() && e.text == "-u") {
        ++k;
        continue;
      }
      if (eq == std::string::npos || !is_name(e.text.substr(0, eq)) || e.text[0] == '-') break;
      Str value = e;
      value.text = e.text.substr(eq + 1);
      env.emplace_back(e.text.substr(0, eq), value);
    }
    return k;
  }
  static const std::set<std::string> wrappers = {"uv",      "nsys",        "ncu",       "numactl",  "taskset",
                                                 "nice",    "nohup",       "time",      "exec",     "stdbuf",
                                                 "timeout", "singularity", "apptainer", "xvfb-run", "chrt"};
  if (wrappers.count(b)) {
    // Wrappers: a sub-command, then options (a value each unless written --name=value), then
    // what they run.
    ++k;
    static const std::set<std::string> subcommands = {"run", "profile", "exec"};
    if (k < fields.size() && subcommands.count(fields[k].text)) ++k;
    static const std::set<std::string> switches = {"--no-sync",    "--frozen", "--locked",          "--isolated",
                                                   "--no-project", "-p",       "--preserve-status", "--all"};
    k = skip_options(
        fields, k,
        [&](const std::string& t) { return (b == "nohup" || b == "time" || b == "exec" || switches.count(t)) ? 0 : 1; },
        [](const std::string&, const Str&) {});
    if ((b == "timeout" || b == "taskset" || b == "singularity" || b == "apptainer" || b == "chrt") &&
        k < fields.size())
      ++k;  // the duration, the CPU mask, the image, the priority
    return k;
  }
  return k;
}

// The GPU count of a launch: torchrun's (or deepspeed's) own, else srun's or mpirun's tasks, else
// an exported WORLD_SIZE; why it is not known where a count is given but unknown.
void launcher_world_size(Found& f, const Counts& counts, std::size_t line) {
  std::string why;
  auto count = [&](const std::optional<Str>& v, const char* what) -> std::optional<std::int64_t> {
    if (!v) return 1;
    if (!v->known()) {
      why = fmt::format("{} {}: {}", what, v->text, v->unknown);
      return std::nullopt;
    }
    if (!all_digits(v->text) || v->text.size() > 9 || std::stoll(v->text) < 1) {
      why = fmt::format("line {}: {} {} is not a number of GPUs mme can use", line, what, v->text);
      return std::nullopt;
    }
    return std::stoll(v->text);
  };
  auto product = [&](const std::optional<Str>& a, const char* an, const std::optional<Str>& b, const char* bn,
                     const std::string& launcher) {
    const auto x = count(a, an), y = count(b, bn);
    if (!x || !y) return;
    f.world_size = *x * *y;
    f.world_from = fmt::format("{} {} {} x {} {} (line {})", launcher, an, *x, bn, *y, line);
  };
  if (!counts.torchrun.empty()) {
    f.launcher = counts.torchrun;
    product(counts.nproc, "--nproc_per_node", counts.nnodes, "--nnodes", counts.torchrun);
  } else if (counts.deepspeed) {
    f.launcher = "deepspeed";
    if (!counts.ds_gpus)
      why = fmt::format("line {}: deepspeed without --num_gpus uses every GPU of the machine", line);
    else
      product(counts.ds_gpus, "--num_gpus", counts.ds_nodes, "--num_nodes", "deepspeed");
  } else if (!counts.tasks_from.empty() && counts.tasks) {
    f.launcher = counts.tasks_from;
    if (const auto t = count(counts.tasks, "--ntasks")) {
      f.world_size = *t;
      f.world_from = fmt::format("{} tasks {} (line {})", counts.tasks_from, *t, line);
    }
  } else if (!counts.tasks_from.empty() && counts.nodes && counts.per_node) {
    f.launcher = counts.tasks_from;
    product(counts.nodes, "--nodes", counts.per_node, "--ntasks-per-node", "srun");
  } else {
    f.launcher = counts.tasks_from.empty() ? "python" : counts.tasks_from;
    for (const auto& [name, v] : f.env)
      if (name == "WORLD_SIZE") {
        if (const auto ws = count(v, "WORLD_SIZE")) {
          f.world_size = *ws;
          f.world_from = fmt::format("the exported WORLD_SIZE={}", *ws);
        }
      }
  }
  f.world_unknown = why;
}

}  // namespace

// bash / sh -c, a bash or sbatch here-document, sbatch --wrap: a script of its own, read in a child
// shell; another script file, which mme does not read, is a command of unknown status.
Status Shell::child_script(const std::string& b, const std::vector<Str>& fields, std::size_t k,
                           const std::optional<Str>& input, std::size_t input_line, std::size_t line,
                           const std::vector<std::pair<std::string, Str>>& env) {
  if (b == "bash" || b == "sh" || b == "dash") {
    std::size_t j = k + 1;
    while (j < fields.size() && is_option(fields[j]) && fields[j].text != "-c") j += fields[j].text == "-o" ? 2 : 1;
    if (j < fields.size() && fields[j].text == "-c") {
      if (j + 1 >= fields.size()) fail(line, fmt::format("{} -c without a command", b));
      const Str& cmd = fields[j + 1];
      // Parts mme does not know stay their expansions ("$X", "$(cmd)"), unknown in the child
      // too; an argument of this shell ($1) would mean the child's own.
      for (const auto& sp : cmd.spans)
        if (!sp.variable.empty() && sp.variable[0] == '$')
          fail(line, fmt::format("`{} -c` of a command mme does not know: {}", b, sp.why));
      run_child(cmd.text, fmt::format("{} ({} -c)", where(line), b),
                std::vector<Str>(fields.begin() + static_cast<std::ptrdiff_t>(j) + 2, fields.end()), env);
      return known(true);
    }
    if (j < fields.size()) {
      sh_.notes.push_back(
          fmt::format("{}: `{} {}` runs another script, which mme does not read", where(line), b, fields[j].text));
      return unknown_status(fmt::format("line {}: another script", line));
    }
    if (input) {
      run_child(input->text, fmt::format("{} ({} here-document)", where(input_line), b), {}, env);
      return known(true);
    }
    return unknown_status(fmt::format("line {}: `{}` reads its commands from its input", line, b));
  }
  if (b == "sbatch") {
    std::size_t j = k + 1;
    while (j < fields.size() && is_option(fields[j])) {
      const std::string& t = fields[j].text;
      if (t.rfind("--wrap", 0) == 0) {
        const Str cmd = t == "--wrap" && j + 1 < fields.size() ? fields[j + 1] : Str::of(t.substr(7));
        run_child(cmd.text, fmt::format("{} (sbatch --wrap)", where(line)), {}, env);
        return known(true);
      }
      j += (t.size() == 2 && t[1] != '-') ? 2 : 1;  // -N 2; long options are written --name=value
    }
    if (j < fields.size()) {
      sh_.notes.push_back(
          fmt::format("{}: `sbatch {}` submits another script, which mme does not read", where(line), fields[j].text));
      return unknown_status(fmt::format("line {}: another script", line));
    }
    if (input) {
      // The job script; sbatch hands it the environment (--export=ALL).
      run_child(input->text, fmt::format("{} (sbatch here-document)", where(input_line)), {}, env);
      return known(true);
    }
    return unknown_status(fmt::format("line {}: sbatch reads its script from its input", line));
  }
  return unknown_status(fmt::format("line {}: `{}` is a command mme does not run", line, b));
}

std::vector<std::pair<std::string, Str>> Shell::exported_env(
    const std::vector<std::pair<std::string, Str>>& extra) const {
  std::vector<std::pair<std::string, Str>> env;
  for (const auto& [name, v] : vars)
    if (v.exported && !v.items.empty() && !(v.given && !is_modelled_environment(name)))
      env.emplace_back(name, v.items.front());
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

Status Shell::launch(const std::vector<Str>& fields, const std::vector<std::pair<std::string, Str>>& prefix,
                     const std::optional<Str>& input, std::size_t input_line, const Node& n) {
  const std::size_t line = n.line;
  // A bare argument list: the lines of an argument file, or a pasted list of flags.
  if (is_option(fields[0]) && fields[0].text.rfind("--", 0) == 0) {
    if (!sh_.found.empty() && sh_.found.back().bare && sh_.found.back().where.rfind(source_, 0) == 0) {
      auto& args = sh_.found.back().args;
      args.insert(args.end(), fields.begin(), fields.end());
      sh_.found.back().env = exported_env(prefix);
    } else {
      Found f;
      f.line = line;
      f.where = where(line);
      f.bare = true;
      f.args = fields;
      f.env = exported_env(prefix);
      sh_.found.push_back(std::move(f));
    }
    return known(true);
  }
  std::vector<std::pair<std::string, Str>> env = prefix;
  Counts counts;
  std::size_t k = 0, entry = fields.size();
  while (k < fields.size()) {
    const Str& w = fields[k];
    const std::string b = w.file_name();
    if (b.size() > 3 && b.substr(b.size() - 3) == ".py") {
      entry = k;
      break;
    }
    if (const std::size_t next = skip_launcher(b, fields, k, counts, env); next != k) {
      k = next;
      continue;
    }
    if (is_python(b)) {
      // python [options] script | -m torch.distributed.run ... | -m module | -c code
      std::size_t j = k + 1;
      while (j < fields.size() && is_option(fields[j]) && fields[j].text != "-m" && fields[j].text != "-c")
        j += (fields[j].text == "-W" || fields[j].text == "-X") ? 2 : 1;
      if (j < fields.size() && fields[j].text == "-c")
        return unknown_status(fmt::format("line {}: python -c, which mme does not run", line));
      if (j < fields.size() && fields[j].text == "-m") {
        const std::string module = j + 1 < fields.size() ? fields[j + 1].text : "";
        if (module != "torch.distributed.run" && module != "torch.distributed.launch") {
          sh_.notes.push_back(fmt::format("{}: `{} -m {}` runs a module, not an entry script", where(line), b, module));
          return unknown_status(fmt::format("line {}: a module mme does not run", line));
        }
        ++j;  // at the module: the torchrun branch reads its options
      }
      k = j;
      continue;
    }
    if (b == "bash" || b == "sh" || b == "dash" || b == "sbatch")
      return child_script(b, fields, k, input, input_line, line, env);
    if (!w.known()) {
      // A command word mme does not know (a launcher in a variable): a launch if a script follows.
      ++k;
      continue;
    }
    break;  // not a launcher
  }
  if (entry == fields.size()) {
    if (!counts.torchrun.empty() || counts.deepspeed)
      sh_.notes.push_back(fmt::format("{}: `{}` launches no Python script mme can see", where(line), clip(n.source)));
    else if (!fields[0].known())
      sh_.notes.push_back(fmt::format("{}: `{}`: {}", where(line), clip(n.source), fields[0].unknown));
    return unknown_status(fmt::format("line {}: `{}` is a command mme does not run", line, clip(n.source)));
  }
  Found f;
  f.line = line;
  f.where = where(line);
  f.entry = fields[entry];
  f.args.assign(fields.begin() + static_cast<std::ptrdiff_t>(entry) + 1, fields.end());
  f.env = exported_env(env);
  launcher_world_size(f, counts, line);
  sh_.found.push_back(std::move(f));
  return known(true);
}

}  // namespace mme::launch
