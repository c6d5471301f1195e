// The `tputrain` command line (DESIGN section 2): parses options into tpu::Options and runs a
// script, -e chunks, standard input, the REPL or the golden test runner.
// Exit status: 0 success, 1 script error, 2 usage error, 128 + N after signal N.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <lua.hpp>

#include "cli.h"
#include "host_allocator.h"
#include "interpreter.h"
#include "runtime/float_mode.h"

namespace {

constexpr const char* kUsage = R"usage(usage: tputrain [options] script.lua [args...]   run a script (args in Lua's global `arg`)
       tputrain [options]                        REPL on a terminal; otherwise run standard input
       tputrain [options] -e 'lua code' [script.lua [args...]]
                                                 run a chunk (-e may repeat), then the script if any
       tputrain test PATH... [--update]          golden tests: run each NAME.lua (PATH is a file or a
                                                 directory of them), compare with NAME.out / NAME.err
       tputrain plot LOG.csv OUT.svg             draw the curves of a csv_logger file as an SVG chart
       tputrain --help | --version

options:
  --cores N          simulated TPU cores (tpu.strategy.auto() returns TPU{cores=N}; without it: 1)
  --tpu v2|v3|v4     TPU generation for the per-core HBM capacity (8, 16, 32 GiB; default v3)
  --bf16             mixed_bfloat16 policy: variables f32, compute bf16
  --threads N        host threads that run the simulated cores (default: all)
  --seed N           seed for the script's randomness
  --dump-graphs DIR  write every compiled graph to DIR
  --profile          print compiles, cache hits and compile time at exit
  --no-opt           compile without the pass pipeline (folding, CSE, DCE, fusion), to compare
  --quiet            less output
  -e CODE            run CODE (chunk name "(command line)")
  --                 stop handling options
  -h, --help         this text
  -v, --version      print the version

environment:
  TPUTRAIN_CORES=N       like --cores when the option is absent
  TPUTRAIN_BF16=1        like --bf16
  TPUTRAIN_STDLIB=DIR    load the Lua stdlib from DIR instead of the copy built into the binary
  TPUTRAIN_DATA_DIR=DIR  where tpu.data.fashion_mnist() finds the IDX files
                         (default: /usr/share/datasets/fashion-mnist, package dataset-fashion-mnist)
  TPUTRAIN_DEBUG=1       show Lua tracebacks with errors (2: also each pass's time)
  TPUTRAIN_OPT=0         like --no-opt
  TPUTRAIN_CHECK_IR=1    check that every compiled graph prints, parses back and prints the same
  TPUTRAIN_MPI_TIMEOUT=S under multi_worker: seconds a worker waits for the others (default 60)

exit status: 0 success, 1 script error, 2 usage error; after SIGINT, SIGTERM or SIGHUP
             128 + the signal (130, 143, 129): fit stops after its current step
)usage";

struct UsageError {
  std::string message;
};

enum class Mode { run, help, version, test, plot };

struct Command {
  Mode mode = Mode::run;
  tpu::Options options;
  std::vector<std::string> chunks;  // -e, in order
  std::optional<std::string> script;  // "-" = standard input
  std::vector<std::string> args;      // after the script
  std::vector<std::string> test_paths;  // test: the paths; plot: the CSV and SVG files
  bool update = false;
};

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

template <class T>
T parse_integer(std::string_view text, T min, std::string_view what) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min) {
    std::string expected = min > 0 ? "a positive integer" : "a non-negative integer";
    throw UsageError{"invalid " + std::string(what) + " " + in_quotes(text) + " (expected " + expected + ")"};
  }
  return value;
}

// Walks argv; `next_value` fetches the value of an option ("--cores 8" or "--cores=8").
class ArgReader {
 public:
  explicit ArgReader(std::span<char* const> args) : args_(args) {}
  bool done() const { return i_ >= args_.size(); }
  std::string_view peek() const { return args_[i_]; }
  std::string_view take() { return args_[i_++]; }
  std::vector<std::string> rest() {
    std::vector<std::string> out(args_.begin() + std::ptrdiff_t(i_), args_.end());
    i_ = args_.size();
    return out;
  }
  std::string value(std::string_view name, std::optional<std::string_view> inline_value) {
    if (inline_value) return std::string(*inline_value);
    if (done()) throw UsageError{"option " + in_quotes(name) + " needs a value"};
    return std::string(take());
  }

 private:
  std::span<char* const> args_;
  size_t i_ = 0;
};

// Handles one option (arg starts with '-'); false when it is not an option we know.
bool parse_option(std::string_view arg, ArgReader& in, Command& cmd) {
  std::optional<std::string_view> inline_value;
  std::string_view name = arg;
  if (size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
    name = arg.substr(0, eq);
    inline_value = arg.substr(eq + 1);
  }
  tpu::Options& o = cmd.options;
  auto flag = [&](bool& target) {
    if (inline_value) throw UsageError{"option " + in_quotes(name) + " takes no value"};
    target = true;
  };
  if (name == "--cores") o.cores = parse_integer<int>(in.value(name, inline_value), 1, "--cores value");
  else if (name == "--threads") o.threads = parse_integer<int>(in.value(name, inline_value), 1, "--threads value");
  else if (name == "--seed") o.seed = parse_integer<int64_t>(in.value(name, inline_value), 0, "--seed value");
  else if (name == "--dump-graphs") o.dump_dir = in.value(name, inline_value);
  else if (name == "--tpu") o.tpu_version = in.value(name, inline_value);
  else if (name == "--bf16") flag(o.bf16);
  else if (name == "--profile") flag(o.profile);
  else if (name == "--no-opt") flag(o.no_opt);
  else if (name == "--quiet") flag(o.quiet);
  else if (name == "-e") cmd.chunks.push_back(in.value(name, std::nullopt));
  else return false;
  if (name == "--tpu" && o.tpu_version != "v2" && o.tpu_version != "v3" && o.tpu_version != "v4") {
    throw UsageError{"invalid --tpu value " + in_quotes(o.tpu_version) + " (expected v2, v3 or v4)"};
  }
  if (name == "--dump-graphs" && o.dump_dir.empty()) throw UsageError{"option '--dump-graphs' needs a directory"};
  return true;
}

// `test PATH... [--update]`: everything after the word "test".
void parse_test(ArgReader& in, Command& cmd) {
  cmd.mode = Mode::test;
  for (const std::string& a : in.rest()) {
    if (a == "--update") cmd.update = true;
    else if (a.starts_with("-") && a != "-") throw UsageError{"unknown option " + in_quotes(a) + " for 'test'"};
    else cmd.test_paths.push_back(a);
  }
  if (cmd.test_paths.empty()) throw UsageError{"'test' needs at least one PATH (a .lua file or a directory)"};
}

// `plot LOG.csv OUT.svg`: everything after the word "plot".
void parse_plot(ArgReader& in, Command& cmd) {
  cmd.mode = Mode::plot;
  cmd.test_paths = in.rest();
  for (const std::string& a : cmd.test_paths) {
    if (a.starts_with("-") && a != "-") throw UsageError{"unknown option " + in_quotes(a) + " for 'plot'"};
  }
  if (cmd.test_paths.size() != 2) throw UsageError{"'plot' needs two files: a csv_logger LOG.csv and the OUT.svg to write"};
}

// Fills what the environment sets and the command line left out.
void apply_environment(tpu::Options& o) {
  const char* cores = std::getenv("TPUTRAIN_CORES");
  if (o.cores == 0 && cores && *cores) o.cores = parse_integer<int>(cores, 1, "TPUTRAIN_CORES");
  const char* bf16 = std::getenv("TPUTRAIN_BF16");
  if (o.bf16 || !bf16) return;
  std::string_view v = bf16;
  if (v == "1" || v == "true" || v == "yes" || v == "on") o.bf16 = true;
  else if (!(v.empty() || v == "0" || v == "false" || v == "no" || v == "off")) {
    throw UsageError{"invalid TPUTRAIN_BF16 " + in_quotes(v) + " (expected 1 or 0)"};
  }
}

Command parse_command_line(std::span<char* const> args) {
  Command cmd;
  ArgReader in(args);
  bool options_given = false;  // other than -e
  bool options_ended = false;  // by "--": what follows is the script
  while (!in.done()) {
    std::string_view a = in.peek();
    if (a == "--") {
      in.take();
      options_ended = true;
      break;
    }
    if (!a.starts_with("-") || a == "-") break;
    in.take();
    if (a == "-h" || a == "--help" || a == "-v" || a == "--version") {
      cmd.mode = a == "-h" || a == "--help" ? Mode::help : Mode::version;
      return cmd;
    }
    if (!parse_option(a, in, cmd)) throw UsageError{"unknown option " + in_quotes(a)};
    options_given = options_given || a != "-e";
  }
  if (!options_ended && !in.done() && in.peek() == "test" && cmd.chunks.empty()) {
    in.take();
    if (options_given) {
      throw UsageError{"options go to the scripts, not to 'test' (use TPUTRAIN_CORES / TPUTRAIN_BF16)"};
    }
    parse_test(in, cmd);
    return cmd;
  }
  if (!options_ended && !in.done() && in.peek() == "plot" && cmd.chunks.empty()) {
    in.take();
    if (options_given) throw UsageError{"options do not apply to 'plot' (tputrain plot LOG.csv OUT.svg)"};
    parse_plot(in, cmd);
    return cmd;
  }
  if (!in.done()) {
    cmd.script = std::string(in.take());
    cmd.args = in.rest();
  }
  apply_environment(cmd.options);
  return cmd;
}

// ---- running --------------------------------------------------------------------------------

std::string read_stdin() {
  std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  if (text.starts_with("#")) text.erase(0, text.find('\n'));  // a "#!" line, as for files
  return text;
}

// Sets the global `arg` the way the Lua interpreter does for a script read from stdin.
void set_stdin_arg(lua_State* L, const std::vector<std::string>& args) {
  lua_createtable(L, int(args.size()), 1);
  lua_pushliteral(L, "-");
  lua_rawseti(L, -2, 0);
  for (size_t i = 0; i < args.size(); ++i) {
    lua_pushlstring(L, args[i].data(), args[i].size());
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_setglobal(L, "arg");
}

// Like the Lua interpreter: "cannot open foo.lua: No such file or directory".
bool check_readable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::fprintf(stderr, "tputrain: cannot read %s: Is a directory\n", path.c_str());
    return false;
  }
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    std::fclose(f);
    return true;
  }
  std::fprintf(stderr, "tputrain: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
  return false;
}

int run(const Command& cmd) {
  if (cmd.script && *cmd.script != "-" && !check_readable(*cmd.script)) return 1;
  tpu::Interpreter interp(cmd.options);
  bool repl = !cmd.script && cmd.chunks.empty() && isatty(STDIN_FILENO);
  if (!repl) tpu::install_interrupt_handler(interp.state());  // the REPL handles Ctrl-C itself
  int rc = 0;
  for (const std::string& chunk : cmd.chunks) {
    if ((rc = interp.run_string(chunk, "=(command line)")) != 0) break;
  }
  if (rc == 0 && cmd.script == "-") {
    set_stdin_arg(interp.state(), cmd.args);
    rc = interp.run_string(read_stdin(), "=stdin", cmd.args);
  } else if (rc == 0 && cmd.script) {
    rc = interp.run_file(*cmd.script, cmd.args);
  } else if (rc == 0 && cmd.chunks.empty()) {
    rc = repl ? tpu::run_repl(interp) : interp.run_string(read_stdin(), "=stdin");
  }
  interp.finish();
  return tpu::end_workers(rc);
}

// `tputrain plot LOG.csv OUT.svg` runs the stdlib's tpu.plot.csv.
int run_plot(const Command& cmd) {
  tpu::Interpreter interp(cmd.options);
  lua_State* L = interp.state();
  lua_createtable(L, 2, 0);
  for (int i = 0; i < 2; ++i) {
    lua_pushstring(L, cmd.test_paths[size_t(i)].c_str());
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  return interp.run_string("require('tpu.plot').csv(arg[1], arg[2])", "=plot");
}

std::string self_exe(const char* argv0) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

}  // namespace

int main(int argc, char** argv) {
  tpu::flush_subnormals();  // first: every thread started later inherits it
  tpu::tune_host_allocator();
  Command cmd;
  try {
    cmd = parse_command_line(std::span<char* const>(argv + 1, size_t(argc - 1)));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "tputrain: %s\ntry 'tputrain --help'\n", e.message.c_str());
    return 2;
  }
  try {
    switch (cmd.mode) {
      case Mode::help: std::fputs(kUsage, stdout); return 0;
      case Mode::version: std::printf("tputrain %s\n", tpu::version()); return 0;
      case Mode::test: return tpu::run_golden(cmd.test_paths, cmd.update, self_exe(argv[0]));
      case Mode::plot: return run_plot(cmd);
      case Mode::run: return run(cmd);
    }
  } catch (const std::exception& e) {
    tpu::print_error(e.what());
  }
  return 1;
}
