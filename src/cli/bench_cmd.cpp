// `sluice bench run` (interleaved cold-process arms with floors, reports and charts) and
// `sluice bench drives` (O_DIRECT read ceilings per home and queue depth, stored for the reader).
#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/drives.h"
#include "bench/harness.h"
#include "bench/report.h"
#include "bench/svg.h"
#include "cli/arg_lists.h"
#include "cli/commands.h"
#include "core/durable_file.h"
#include "core/error.h"
#include "format/json_util.h"
#include "format/safetensors.h"
#include "model/registry.h"
#include "store/reader.h"

namespace sluice::cli {
namespace {


std::vector<int32_t> to_ids(const std::vector<int64_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

bool looks_like_ids(const std::string& text) {
  bool digit = false;
  for (char ch : text) {
    if (std::isdigit((unsigned char)ch)) digit = true;
    else if (!(ch == ',' || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t' || ch == '[' || ch == ']')) return false;
  }
  return digit;
}

std::vector<int32_t> tokenize(const std::string& binary, const std::string& model, const std::string& text) {
  std::string out = bench::capture_output({binary, "tokenize", "--model", model, "--json", "--", text});
  return to_ids(parse_int_list(out, "sluice tokenize output", 0));
}

std::string default_out(const char* kind) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return std::string("bench-out/") + kind + "-" + buf;
}

struct RunCliArgs {
  std::string model, prompt_ids, prompt, prompt_file, max_new = "32", expect_ids, expect_text, out, compute_arm;
  std::string memory_limit;
  std::vector<std::string> arms;
  int reps = 2;
  bool floor = false, quiet = false, cold = false;
  int floor_qd = 4;
  double floor_seconds = 2, sample_ms = 50;
};

int bench_run(const RunCliArgs& a) {
  bench::BenchOptions o;
  o.binary = bench::self_executable();
  o.model = a.model;
  int given = int(!a.prompt_ids.empty()) + int(!a.prompt.empty()) + int(!a.prompt_file.empty());
  if (given != 1) fail("bench run: give exactly one of --prompt-ids, --prompt, --prompt-file");
  if (!a.prompt_ids.empty()) {
    o.prompt = to_ids(parse_int_list(a.prompt_ids, "--prompt-ids", 0));
  } else if (!a.prompt.empty()) {
    o.prompt = tokenize(o.binary, a.model, a.prompt);
  } else {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) fail("--prompt-file ", a.prompt_file, ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    o.prompt = looks_like_ids(text) ? to_ids(parse_int_list(text, ("--prompt-file " + a.prompt_file).c_str(), 0))
                                    : tokenize(o.binary, a.model, text);
  }
  if (o.prompt.empty()) fail("the prompt has no tokens");
  o.max_new = parse_int_list(a.max_new, "--max-new", 1);
  for (const auto& s : a.arms) o.arms.push_back(bench::parse_arm(s));
  for (size_t i = 0; i < o.arms.size(); ++i)
    for (size_t k = 0; k < i; ++k)
      if (o.arms[i].name == o.arms[k].name) fail("--arm: two arms are named '", o.arms[i].name, "'");
  o.reps = a.reps;
  if (!a.expect_ids.empty() && !a.expect_text.empty()) fail("give --expect-ids or --expect-text, not both");
  if (!a.expect_ids.empty()) o.expect_ids = to_ids(parse_int_list(a.expect_ids, "--expect-ids", 0));
  if (!a.expect_text.empty()) o.expect_text = a.expect_text;
  o.out_dir = a.out.empty() ? default_out("run") : a.out;
  o.floor = a.floor;
  o.floor_queue_depth = a.floor_qd;
  o.floor_seconds = a.floor_seconds;
  o.compute_arm = a.compute_arm;
  if (!o.compute_arm.empty()) {
    bool found = false;
    for (const auto& arm : o.arms) found |= arm.name == o.compute_arm;
    if (!found) fail("--compute-arm ", o.compute_arm, " is not one of the --arm names");
  }
  o.sample_ms = a.sample_ms;
  if (!a.memory_limit.empty()) bench::parse_memory_limit(a.memory_limit, o);
  o.cold = a.cold;
  if (!a.quiet) o.log = [](const std::string& s) { std::fprintf(stderr, "bench: %s\n", s.c_str()); };
  o.expert_bank = model::expert_bank_from_config;
  bench::BenchResult res = bench::run_bench(o);
  auto files = bench::write_reports(o, res);
  std::printf("%s", bench::markdown_table(res).c_str());
  for (const auto& f : files) std::fprintf(stderr, "bench: wrote %s\n", f.c_str());
  int valid = 0;
  for (const auto& r : res.runs) valid += r.m.valid;
  if (valid == 0) fail("bench run: no valid run (see ", o.out_dir, "/results.md)");
  return 0;
}

}  // namespace

Action register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: interleaved arms against floors, drive ceilings");
  bench->require_subcommand(1);

  auto a = std::make_shared<RunCliArgs>();
  CLI::App* run = bench->add_subcommand(
      "run", "Run arms (extra `sluice run` flags) as cold processes, interleaved A B B A, and report");
  run->add_option("--model", a->model, "Model directory")->required();
  run->add_option("--prompt-ids", a->prompt_ids, "Prompt as comma-separated token ids");
  run->add_option("--prompt", a->prompt, "Prompt text (tokenized with the model's tokenizer)");
  run->add_option("--prompt-file", a->prompt_file, "File holding prompt ids (comma/space separated) or text");
  run->add_option("--max-new", a->max_new, "Tokens to generate; a list (32,128,512) makes one group per length")
      ->default_val("32");
  run->add_option("--arm", a->arms,
                  "NAME:FLAGS (repeat); FLAGS are extra `sluice run` arguments, `--binary PATH` runs that arm with "
                  "another sluice build, and `--peer 'CMD'` runs another engine through CMD (e.g. "
                  "\"llama:--peer 'node bench/peer/llama.mjs' --model m.gguf\"; see bench/peer/README.md)")
      ->required();
  run->add_option("--reps", a->reps, "Repetitions of every arm")->default_val(2)->transform(integer_in(1, 10000));
  run->add_option("--expect-ids", a->expect_ids, "Expected output ids (text of record); mismatching runs are invalid");
  run->add_option("--expect-text", a->expect_text, "Expected output text (needs the model's tokenizer)");
  run->add_option("--out", a->out, "Output directory (default bench-out/run-<UTC time>)");
  run->add_flag("--floor", a->floor,
                "Also measure raw O_DIRECT random reads of each arm model's expert records in the rotation");
  run->add_option("--floor-qd", a->floor_qd, "Reads in flight per home for --floor")
      ->default_val(4)
      ->transform(integer_in(1, store::kMaxQueueDepth));
  run->add_option("--floor-seconds", a->floor_seconds, "Seconds per floor measurement")->default_val(2.0)->transform(positive_number(3600));
  run->add_option("--compute-arm", a->compute_arm,
                  "Arm whose decode time per token is the compute floor (e.g. resident experts, warm)");
  run->add_option("--memory-limit", a->memory_limit,
                  "Run each process in a cgroup v1 memory cgroup (memory and page cache together) of SIZE bytes "
                  "(e.g. 600M) or of a fraction of its model's bytes (e.g. 0.333x); needs root");
  run->add_flag("--cold", a->cold, "Drop the page cache of each run's model files and expert homes before it");
  run->add_option("--sample-ms", a->sample_ms, "Device counter sampling interval")->default_val(50.0)->transform(positive_number(60000));
  run->add_flag("--quiet", a->quiet, "No progress lines on stderr");

  auto d = std::make_shared<bench::DriveOptions>();
  auto depths = std::make_shared<std::string>("1,2,4,8,16");
  auto record_kb = std::make_shared<int64_t>(0);
  auto probe_mb = std::make_shared<int64_t>(0);
  auto out = std::make_shared<std::string>();
  auto no_home_files = std::make_shared<bool>(false);
  CLI::App* drives = bench->add_subcommand(
      "drives", "O_DIRECT whole-record read bandwidth of each home by queue depth, alone and together");
  drives->add_option("--home", d->homes, "Home directory (repeat)")->required();
  drives->add_option("--model", d->model, "Read this model's expert records and update its manifest's bandwidths");
  drives->add_option("--depths", *depths, "Queue depths to measure")->default_val("1,2,4,8,16");
  drives->add_option("--record-kb", *record_kb, "Read size in KiB (default: the model's expert slot, else 2048)")
      ->transform(integer_in(0, 1 << 20));
  drives->add_option("--seconds", d->seconds, "Seconds per measurement")->default_val(2.0)->transform(positive_number(3600));
  drives->add_option("--store-qd", d->store_queue_depth, "Queue depth whose bandwidth is stored (the engine's)")
      ->default_val(4)
      ->transform(integer_in(1, store::kMaxQueueDepth));
  drives->add_option("--probe-mb", *probe_mb, "Write a probe file of this size on homes that hold too little data")
      ->transform(integer_in(0, 1 << 30));
  drives->add_option("--out", *out, "Also write result.json and drives.svg here");
  drives->add_flag("--no-home-files", *no_home_files, "Do not write <home>/sluice-drive.json");

  return [=]() -> int {
    if (run->parsed()) return bench_run(*a);
    d->depths.clear();
    for (int64_t q : parse_int_list(*depths, "--depths", 1)) d->depths.push_back(int(q));
    d->record_bytes = uint64_t(*record_kb) * 1024;
    d->probe_bytes = uint64_t(*probe_mb) << 20;
    d->write_home_files = !*no_home_files;
    d->log = [](const std::string& s) { std::fprintf(stderr, "bench drives: %s\n", s.c_str()); };
    d->expert_bank = model::expert_bank_from_config;
    nlohmann::json r = bench::measure_drives(*d);
    if (!out->empty()) {
      std::filesystem::create_directories(*out);
      write_file_durably(*out + "/result.json", r.dump(1) + "\n");
      bench::write_chart(*out + "/drives.svg", bench::drives_chart_svg(r));
    }
    std::printf("%s\n", r.dump(1).c_str());
    return 0;
  };
}

}  // namespace sluice::cli
