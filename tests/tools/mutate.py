#!/usr/bin/env python3
"""Mutation spot-check: do the tests catch small, realistic bugs?

Each mutation below is one bug as someone could plausibly write it: a file, an exact piece of
source text, what it becomes, and a line saying what the bug is. Mutations are applied one
at a time to the working tree, the build is updated (`cmake --build BUILD`), the tests run
(ctest, never retried: a test that passes on a second try did not catch the bug), and the
source is restored, always: on success, on failure, on Ctrl-C and on SIGTERM. A run killed
harder (SIGKILL) leaves its backup in BUILD/mutate-backup/, which the next run restores
before anything else.

A mutation is "caught" when a test that passed before the mutation fails (or the run times
out), "survived" when every test still passes, and "skipped" when its search text is not in
the file (the code moved or changed; update the entry) or its build fails (not a real bug).

Usage:
    tests/tools/mutate.py --list
    tests/tools/mutate.py --check      (every entry's search text occurs once; builds nothing)
    tests/tools/mutate.py --check-tests [--build-dir build]
                                       (every entry's test names exist in a complete build)
    tests/tools/mutate.py [--only NAME[,NAME...]] [--build-dir build] [-R REGEX] [-L LABEL]
                          [-E REGEX] [--timeout SECONDS] [--targeted] [-j N]

  --targeted   run, per mutation, only the tests named by its entry (fast spot-check);
               otherwise the whole suite (or the -R/-L/-E selection) runs for each.
  --timeout    wall-clock limit of one mutation's test run (default 900 s); a run that
               exceeds it counts as caught (a hang is a detected bug).
  --no-baseline  skip the unmutated test run (then a test failing anyway counts as a catch).

Exit status: 0 when every applied mutation was caught, 1 when one survived, 2 on errors.
Python 3, standard library only.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Edit:
    path: str     # relative to the repository root
    search: str   # must occur exactly once
    replace: str


@dataclass
class Mutation:
    name: str
    description: str
    edits: list
    tests: str = ""  # ctest -R regex of the tests meant to catch it (--targeted)


def m(name, description, edits, tests=""):
    return Mutation(name, description, [Edit(*e) for e in edits], tests)


MUTATIONS = [
    m("rms-norm-no-eps", "RMS norm drops its epsilon (a zero row becomes 0/0)",
      [("src/kernels/ops.cpp", "1.0f / std::sqrt(mean + eps);", "1.0f / std::sqrt(mean);"),
       ("src/kernels/ops_avx512.cpp", "_mm512_set1_ps(1.0f / std::sqrt(mean + eps))",
        "_mm512_set1_ps(1.0f / std::sqrt(mean))")],
      tests="Ops\\.|GreedyReference"),
    m("preempt-oldest", "under KV pressure the scheduler preempts the oldest sequence, not the "
      "youngest",
      [("src/engine/scheduler.cpp", "if (victim == nullptr || runs_before(*victim, *s))",
        "if (victim == nullptr || runs_before(*s, *victim))")],
      tests="EngineTest|SchedulingPolicy"),
    m("static-admits-busy", "static batching admits new requests into a busy engine",
      [("src/engine/scheduler.cpp",
        "const bool admitting = continuous ? plan.preempted.empty() : running_.empty();",
        "const bool admitting = continuous ? plan.preempted.empty() : true;")],
      tests="Scheduler|EngineTest|SchedulingPolicy|BatchInvariance"),
    m("admits-after-preemption", "continuous batching admits new requests in the step that "
      "just preempted (thrashing)",
      [("src/engine/scheduler.cpp",
        "const bool admitting = continuous ? plan.preempted.empty() : running_.empty();",
        "const bool admitting = continuous ? true : running_.empty();")],
      tests="Scheduler"),
    m("static-frees-finished-rows", "static batching frees a finished request's row at once "
      "instead of keeping it as padding until its batch ends",
      [("src/engine/scheduler.cpp", "    s.padding = true;  // keeps computing",
        "    erase(&s);  // keeps computing")],
      tests="Scheduler|EngineTest"),
    m("padding-row-not-advanced", "a padded row is not given its repeated token, so it stops "
      "being computed",
      [("src/engine/scheduler.cpp",
        "if (s.padding && p.logits_rows > 0) s.tokens.push_back(s.tokens.back());", "")],
      tests="Scheduler|EngineTest"),
    m("spec-accepts-one-more", "speculation keeps the KV of one guess more than was accepted",
      [("src/engine/scheduler.cpp",
        "std::clamp(static_cast<int>(out.tokens.size()) - 1, 0, d->second);",
        "std::clamp(static_cast<int>(out.tokens.size()), 0, d->second);")],
      tests="Speculative|Scheduler"),
    m("spec-accepts-one-fewer", "speculation keeps the KV of one accepted guess fewer (issue 53's "
      "audit: the accepted count off by one)",
      [("src/engine/scheduler.cpp",
        "std::clamp(static_cast<int>(out.tokens.size()) - 1, 0, d->second);",
        "std::clamp(static_cast<int>(out.tokens.size()) - 2, 0, d->second);")],
      tests="Speculative|Scheduler"),
    m("stall-unreported", "a running sequence with no token left to feed is not reported: its "
      "request waits forever instead of failing",
      [("src/engine/scheduler.cpp", "if (s->status != SequenceStatus::kRunning || "
        "s->uncomputed() >= 1) continue;", "continue;")],
      tests="Scheduler"),
    m("stall-limit-ignored", "steps with nothing runnable never fail the requests stuck behind "
      "them",
      [("src/engine/scheduler.cpp", "if (++empty_plans_ < options_.stall_steps) return;",
        "return;")],
      tests="Scheduler"),
    m("spec-reject-keeps-draft", "a rejected guess can still be drawn (resampling from p, not "
      "from the residual max(0, p - q))",
      [("src/sampling/sampler.cpp", "chosen = residual_total > 0.0",
        "chosen = false && residual_total > 0.0")],
      tests="SpeculativeVerify"),
    m("journal-no-fdatasync", "the batch journal never fdatasyncs (a power cut loses "
      "acknowledged records; a SIGKILL does not show it)",
      [("src/batch/record_journal.cpp", "if (unsynced_ > 0 && files_.fdatasync(fd_) != 0) {",
        "if (unsynced_ > 0 && false) {"),
       ("src/batch/record_journal.cpp", "if (unsynced_ > 0) files_.fdatasync(fd_);", "")],
      tests="RecordJournal|BatchRunnerTest"),
    m("journal-no-dir-sync", "a new journal file's directory entry is never synced",
      [("src/batch/record_journal.cpp",
        "if (!existed) files_.sync_directory(std::filesystem::absolute(path).parent_path()"
        ".string());", "(void)existed;")],
      tests="RecordJournal|BatchRunnerTest"),
    m("resume-duplicates-unchecked", "duplicate custom_ids are only refused on a fresh batch: "
      "on resume, a custom_id an earlier run answered may appear on two lines",
      [("src/batch/resume_plan.cpp", "if (!inserted) {",
        "if (!inserted && answered.size() == 0) {")],
      tests="ResumePlan|BatchRunnerTest"),
    m("resume-reruns-answered", "resume runs the lines earlier runs answered again",
      [("src/batch/batch_runner.cpp", "if (plan_.answered_lines.erase(line) > 0) continue;",
        "plan_.answered_lines.erase(line);")],
      tests="BatchRunnerTest|batch_kill_resume"),
    m("hash-skips-token-no-recheck", "block hashes ignore each block's last token and match() "
      "trusts the hash (a prompt differing at position 15 reuses another's KV)",
      [("src/kv/block_hash.cpp",
        "tokens.subspan(b * block_size, static_cast<size_t>(block_size))",
        "tokens.subspan(b * block_size, static_cast<size_t>(block_size) - 1)"),
       ("src/kv/prefix_cache.cpp",
        "!std::equal(mine.begin(), mine.end(), e.tokens.begin(), e.tokens.end())",
        "(false && mine.empty())")],
      tests="BlockHash|PrefixCache"),
    m("match-no-token-recheck", "match() trusts a hash hit without comparing the tokens",
      [("src/kv/prefix_cache.cpp",
        "!std::equal(mine.begin(), mine.end(), e.tokens.begin(), e.tokens.end())",
        "(false && mine.empty())")],
      tests="PrefixCache"),
    m("match-no-parent-check", "match() accepts a cached block whose prefix differs",
      [("src/kv/prefix_cache.cpp", "if (e.parent != parent ||", "if (false ||")],
      tests="PrefixCache"),
    m("sse-done-one-newline", "the stream ends with `data: [DONE]` and a single newline",
      [("src/serve/sse.h", 'kSseDone = "data: [DONE]\\n\\n";', 'kSseDone = "data: [DONE]\\n";')],
      tests="Sse\\.|GenerationStream|e2e_serve_curl|e2e_serve_connections"),
    m("sse-done-dropped", "a streamed generation ends without `data: [DONE]`",
      [("src/serve/generation.cpp", "    exchange_->stream(std::string(kSseDone));\n", "")],
      tests="GenerationStream|e2e_serve_curl|e2e_serve_connections"),
    m("advisor-prefix-threshold", "the advisor turns the prefix cache on for 2 % shareable "
      "prompt tokens instead of 20 %",
      [("src/advise/advisor.cpp", "if (shareable >= 0.2) {", "if (shareable >= 0.02) {")],
      tests="Advisor"),
    m("cost-input-pays-whole-run", "the cost per input token charges the whole run to the "
      "prompts instead of their share of the machine's time",
      [("src/advise/cost.cpp", "c.input = per_million(run_usd * v.prefill_share, v.input_tokens);",
        "c.input = per_million(run_usd, v.input_tokens);")],
      tests="Cost\\."),
    m("cost-goodput-counts-every-request", "the cost at the SLO divides by the output of every "
      "request, met or missed",
      [("src/advise/cost.cpp", "if (loadgen::meets_slo(r, s.slo)) {", "if (true) {")],
      tests="Cost\\."),
    m("config-extras-ignored", "a --config file's unknown key is silently ignored",
      [("apps/rapide/cli_conventions.cpp",
        "command->allow_config_extras(CLI::config_extras_mode::error);",
        "command->allow_config_extras(CLI::config_extras_mode::ignore);")],
      tests="CliConventions"),
    m("gbnf-code-point-unchecked", "a grammar's \\u / \\U escape may name a surrogate or a "
      "code point beyond U+10FFFF (its bytes decode to U+FFFD)",
      [("src/grammar/gbnf.cpp", "return scalar_value(cp, text_.substr(start, pos_ - start));",
        "return cp;")],
      tests="Gbnf"),
    m("grammar-work-unlimited", "the matcher never enforces the per-token work limit (a costly "
      "grammar holds up every step)",
      [("src/grammar/matcher.cpp", "if (cancelled || work_ > limit_) {", "if (cancelled) {")],
      tests="TokenMask|GrammarEngine"),
    m("grammar-cancel-ignored", "a mask walk ignores its request's cancellation",
      [("src/grammar/matcher.cpp",
        "const bool cancelled = cancelled_ != nullptr && cancelled_->load(std::memory_order_relaxed);",
        "const bool cancelled = false;")],
      tests="TokenMask|GrammarEngine"),
    m("grammar-cost-stops-at-nullable", "the cost model stops a run at the first part that can "
      "match the empty string ((.*){2000} looks cheap)",
      [("src/grammar/cost.cpp", "run_[pos] = add(cost(e), nullable(e) ? run_[pos + 1] : 0);",
        "run_[pos] = cost(e);")],
      tests="GrammarCost"),
    m("hf-merges-unchecked", "a tokenizer.json merges entry of any shape loads",
      [("src/formats/hf_tokenizer.cpp", "    fail(ErrorCode::kCorrupt,\n"
        "         \"'{}': tokenizer.json model.merges[{}] is {}", "    if (false) fail(ErrorCode::kCorrupt,\n"
        "         \"'{}': tokenizer.json model.merges[{}] is {}")],
      tests="HfLoader"),
    m("histogram-le-exclusive", "a Prometheus bucket does not count an observation equal to "
      "its upper bound (le is inclusive)",
      [("src/serve/metrics.cpp", "std::lower_bound(bounds_.begin(), bounds_.end(), value)",
        "std::upper_bound(bounds_.begin(), bounds_.end(), value)")],
      tests="Histogram"),
    m("rapide-isa-ignored", "the RAPIDE_ISA override is ignored",
      [("src/base/cpu_features.cpp", 'const char* env = std::getenv("RAPIDE_ISA");',
        "const char* env = nullptr;")],
      tests="CpuFeatures"),
    m("top-p-strict", "top-p keeps a token only when the mass before it is strictly below p "
      "(one token short at exact boundaries)",
      [("src/sampling/truncation.cpp", "if (cumulative >= target) return i + 1;",
        "if (cumulative > target) return i + 1;")],
      tests="SamplerTest|SamplerProcessorsTest|TruncationTest"),
    m("repetition-penalty-sign", "the repetition penalty divides negative logits too "
      "(raising the probability of repeated tokens with negative logits)",
      [("src/sampling/logit_processors.cpp",
        "logit = logit > 0.0f ? logit / config.repetition : logit * config.repetition;",
        "logit = logit / config.repetition;")],
      tests="SamplerTest|SamplerProcessorsTest"),
    m("penalty-window-off-by-one", "the penalty window looks at one token fewer than "
      "penalty_last_n",
      [("src/sampling/sampler.cpp",
        "window = std::min(window, static_cast<size_t>(params_.penalty_last_n));",
        "window = std::min(window, static_cast<size_t>(params_.penalty_last_n) - 1);")],
      tests="SamplerTest|SamplerProcessorsTest"),
    m("max-tokens-off-by-one", "a request generates one token more than max_tokens",
      [("src/sampling/finish_reason.cpp", "if (num_generated >= params.max_tokens)",
        "if (num_generated > params.max_tokens)")],
      tests="FinishReasonTest|EngineTest|SchedulingPolicy|e2e_serve_curl"),
    m("context-limit-off-by-one", "a request clipped by the context generates one token past "
      "the limit",
      [("src/engine/output_processor.cpp", "if (!reason && generated >= s.max_generated)",
        "if (!reason && generated > s.max_generated)")],
      tests="EngineTest|SchedulingPolicy"),
    m("stop-holdback-short", "streaming holds back one byte too few of a possible stop string "
      "(a stop split across tokens leaks its first bytes)",
      [("src/sampling/stop_checker.cpp", "longest_stop_ > 0 ? longest_stop_ - 1 : 0",
        "longest_stop_ > 1 ? longest_stop_ - 2 : 0")],
      tests="StopCheckerTest|EngineTest.Stop"),
    m("utf8-holds-complete-char", "a complete UTF-8 character at the end of the text is held "
      "back as if incomplete",
      [("src/sampling/stop_checker.cpp", "return length > i ? i : 0;",
        "return length >= i ? i : 0;")],
      tests="StopCheckerTest|StreamingDetokenizer|EngineTest.Stop"),
    m("bpe-ties-rightmost", "byte-level BPE merges the rightmost of equal-rank pairs first",
      [("src/tokenizer/byte_level_bpe_tokenizer.cpp",
        "(a.rank == b.rank && a.left > b.left)", "(a.rank == b.rank && a.left < b.left)")],
      tests="Tokenizer|tokenizer"),
    m("attention-scale-no-sqrt", "attention scales scores by 1/head_dim instead of "
      "1/sqrt(head_dim)",
      [("src/model/attention.cpp",
        "shape.scale != 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));",
        "shape.scale != 0.0f ? shape.scale : 1.0f / static_cast<float>(head_dim);")],
      tests="Attention|GreedyReference|ModelFormatsAgree"),
    m("kv-cached-freed-first", "a freed cached block goes to the front of the free list, so "
      "cached prefixes are evicted before plain free blocks",
      [("src/kv/block_pool.cpp", "    ++n_cached_free_;\n    push_back(block);\n  } else {",
        "    ++n_cached_free_;\n    push_front(block);\n  } else {")],
      tests="PrefixCache|BlockPool|OffloadEngineTest"),
    # Issue 53: healing and distillation that overfit must say so and keep their best weights.
    m("holdout-keeps-last", "training with held-out data ends with the last weights, not the "
      "best scored ones",
      [("src/train/trainer.cpp",
        "if (result_.kept_earlier()) model.params() = std::move(best_params_);",
        "(void)best_params_;")],
      tests="Trainer|CliPruneDistill"),
    m("holdout-trains-on-held-out", "the held-out tokens stay in the training stream",
      [("src/train/held_out.cpp", "  stream.resize(static_cast<size_t>(n - held));\n", "")],
      tests="HeldOut"),
    m("holdout-never-stops", "the patience never runs out: an overfitting run trains to the end",
      [("src/train/trainer.cpp", "return o_.patience > 0 && without_gain_ >= o_.patience;",
        "return false;")],
      tests="Trainer|CliPruneDistill"),
    # Issue 48's architectures: each mistake of shared/reference/llamacpp2's README 6.3.
    m("qk-norm-dropped", "q/k RMSNorm skipped (qwen3, gemma3, olmo2)",
      [("src/model/model.cpp", "  if (c.qk_norm == QkNorm::kNone) return;", "  return;")],
      tests="llamacpp2_logits_test"),
    m("granite-residual-scale-ignored", "granite's residual multiplier read but not used",
      [("src/formats/architecture.cpp",
        'c.residual_scale = required_f32(gguf, p + "residual_scale");',
        '(void)required_f32(gguf, p + "residual_scale");')],
      tests="llamacpp2_logits_test"),
    m("window-pattern-off-by-one", "the last two layers of each period are global, not one",
      [("src/formats/model_config.h", "layer % window_period < window_period - 1));",
        "layer % window_period < window_period - 2));")],
      tests="llamacpp2_logits_test"),
    m("cohere2-rope-on-global", "cohere2's global layers rotate like the windowed ones",
      [("src/model/model.cpp", "const bool rotate = windowed || c.rope_on_global_layers;",
        "const bool rotate = true;")],
      tests="llamacpp2_logits_test"),
    m("rope-factors-multiply", "Llama 3's rope factors multiply the angle instead of dividing it",
      [("src/model/rope.cpp", "p.factors != nullptr ? theta / p.factors[i] : theta;",
        "p.factors != nullptr ? theta * p.factors[i] : theta;")],
      tests="llamacpp2_logits_test|model_rope_test"),
    # deepseek2 (multi-head latent attention, V3 routing): README 6.3's rows for it.
    m("mla-rope-from-front", "deepseek2's q_pe taken from the front of each q head",
      [("src/model/mla_attention.cpp", "const float* pe = q_.data() + (i * heads + h) * q_head + nope;",
        "const float* pe = q_.data() + (i * heads + h) * q_head;")],
      tests="deepseek2_logits_test"),
    m("mla-kv-a-norm-skipped", "deepseek2's kv_c not normalised (attn_kv_a_norm skipped)",
      [("src/model/mla_attention.cpp",
        "rms_norm(r, w.kv_a_norm.data(), static_cast<int64_t>(kv_lora), c.rms_eps, r);", "")],
      tests="deepseek2_logits_test"),
    m("moe-sigmoid-as-softmax", "DeepSeek-V3's sigmoid expert scores computed as a softmax",
      [("src/model/moe_routing.cpp", "if (rule.gating == ExpertGating::kSigmoid) {",
        "if (false) {")],
      tests="deepseek2_logits_test|model_moe_routing_test"),
    m("moe-selection-bias-ignored", "exp_probs_b.bias left out of the expert choice",
      [("src/model/moe_routing.cpp", "const float* bias = rule.selection_bias;",
        "const float* bias = nullptr;")],
      tests="deepseek2_logits_test|model_moe_routing_test"),

    m("lora-scale-ignored", "a LoRA update is added without its scale (alpha / r times the "
      "user's)",
      [("src/lora/lora_rows.cpp", "for (int64_t i = 0; i < n; ++i) y[i] += d[i] * scale;",
        "for (int64_t i = 0; i < n; ++i) y[i] += d[i];")],
      tests="LoraLogits|LoraRows"),
    m("lora-first-adapter-for-all", "every row of a batch gets the first adapter's update, "
      "whatever adapter it names",
      [("src/lora/lora_rows.cpp", "const LoraWeights* w = adapters[g.adapter]->find(layer, target);",
        "const LoraWeights* w = adapters[0]->find(layer, target);")],
      tests="LoraBatch|LoraRows|LoraEngine"),
    m("peft-qk-not-permuted", "a PEFT adapter's q/k lora_B rows keep Hugging Face's order",
      [("src/lora/lora_peft.cpp",
        "const int heads = is_b ? hf_rope_permute_heads(base.config, gguf_name) : 0;",
        "const int heads = 0;")],
      tests="LoraLogits|LoraMerge"),
    m("lora-prefix-chain-shared", "the prefix cache serves one adapter's K/V to another (the "
      "chain key is not set)",
      [("src/engine/engine_intake.cpp",
        "if (request.adapter >= 0) s->prefix_chain = adapter_identity(model_.lora(request.adapter));",
        "")],
      tests="LoraEngine"),
]


# --- applying and restoring ----------------------------------------------------------------

class Restorer:
    """Keeps the original bytes of every file a mutation touches, in memory and on disk, and
    puts them back; the on-disk copy survives a killed run."""

    def __init__(self, backup_dir):
        self.backup_dir = backup_dir
        self.saved = {}

    def recover_previous(self):
        """Restores what a killed earlier run left mutated; returns the paths restored."""
        restored = []
        if not os.path.isdir(self.backup_dir):
            return restored
        for dirpath, _, names in os.walk(self.backup_dir):
            for name in names:
                backup = os.path.join(dirpath, name)
                rel = os.path.relpath(backup, self.backup_dir)
                shutil.copyfile(backup, os.path.join(ROOT, rel))
                restored.append(rel)
        shutil.rmtree(self.backup_dir)
        return restored

    def save(self, rel):
        if rel in self.saved:
            return
        with open(os.path.join(ROOT, rel), "rb") as f:
            data = f.read()
        backup = os.path.join(self.backup_dir, rel)
        os.makedirs(os.path.dirname(backup), exist_ok=True)
        with open(backup, "wb") as f:
            f.write(data)
        self.saved[rel] = data

    def restore(self):
        for rel, data in self.saved.items():
            with open(os.path.join(ROOT, rel), "wb") as f:
                f.write(data)
        self.saved.clear()
        shutil.rmtree(self.backup_dir, ignore_errors=True)


def check_edits(mutation):
    """None when every edit applies exactly once, else why not."""
    for e in mutation.edits:
        path = os.path.join(ROOT, e.path)
        if not os.path.exists(path):
            return f"file not found: {e.path}: skipped"
        with open(path, encoding="utf-8") as f:
            count = f.read().count(e.search)
        if count == 0:
            return f"search text not found in {e.path}: skipped"
        if count > 1:
            return f"search text occurs {count} times in {e.path}: skipped"
    return None


def apply_edits(mutation, restorer):
    for e in mutation.edits:
        restorer.save(e.path)
        path = os.path.join(ROOT, e.path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(e.search, e.replace, 1))


# --- building and testing ------------------------------------------------------------------

def run_group(cmd, timeout, log_path):
    """Runs cmd in its own process group with output to log_path; returns (rc, timed_out)."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            return None, True
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def build(args, log_path):
    rc, timed_out = run_group(["cmake", "--build", args.build_dir], args.build_timeout, log_path)
    return rc == 0 and not timed_out


FAILED_RE = re.compile(r"^\s*\d+\s*-\s*(\S+)\s+\((.*)\)\s*$")


def run_tests(args, regex, log_path, timeout=None):
    """(failed test names, timed_out). No --repeat: every test runs exactly once."""
    cmd = ["ctest", "--test-dir", args.build_dir, "-j", str(args.jobs), "--timeout",
           str(args.test_timeout)]
    if regex:
        cmd += ["-R", regex]
    if args.label:
        cmd += ["-L", args.label]
    if args.exclude:
        cmd += ["-E", args.exclude]
    _, timed_out = run_group(cmd, timeout or args.timeout, log_path)
    failed = []
    with open(log_path, errors="replace") as f:
        in_list = False
        for line in f:
            if line.startswith("The following tests FAILED"):
                in_list = True
                continue
            match = FAILED_RE.match(line) if in_list else None
            if match:
                failed.append(match.group(1))
    with open(log_path, errors="replace") as f:
        if "No tests were found" in f.read():
            raise RuntimeError(f"no tests match the selection (see {log_path})")
    return failed, timed_out


# --- main ----------------------------------------------------------------------------------

def check_list():
    """0 when every mutation applies to today's source, else 1 with one line per stale entry.

    A stale entry is skipped by a run, silently shrinking the audit (issue 53: three entries
    targeted code that no longer existed); the ctest mutate_list_applies runs this."""
    stale = []
    names = set()
    for mu in MUTATIONS:
        why = check_edits(mu)
        if mu.name in names:
            why = "the name is used twice"
        names.add(mu.name)
        if why:
            stale.append(mu.name)
            print(f"{mu.name:28} {why.replace(': skipped', '')}")
    print(f"{len(MUTATIONS) - len(stale)} of {len(MUTATIONS)} mutations apply"
          + (f"; fix or remove: {', '.join(stale)}" if stale else ""))
    return 1 if stale else 0


def check_tests(build_dir):
    """0 when every alternative of every entry's test regex names a test of the built tree.

    A targeted run (--targeted) runs only those tests: an alternative that matches nothing
    (a test renamed or removed) silently narrows what a mutation is tried against. Needs a
    complete build (ctest lists an unbuilt test binary as NAME_NOT_BUILT)."""
    listing = subprocess.run(["ctest", "--test-dir", build_dir, "-N"], capture_output=True,
                             text=True)
    names = [line.split(":", 1)[1].strip() for line in listing.stdout.splitlines()
             if re.match(r"\s*Test\s+#\d+:", line)]
    unbuilt = [n for n in names if n.endswith("_NOT_BUILT")]
    if not names or unbuilt:
        print(f"{len(unbuilt)} test binaries are not built in {build_dir} (e.g. "
              f"{', '.join(unbuilt[:3]) or 'no tests at all'}): build everything first",
              file=sys.stderr)
        return 2
    stale = []
    for mu in MUTATIONS:
        for alternative in (mu.tests.split("|") if mu.tests else []):
            if not any(re.search(alternative, n) for n in names):
                stale.append(mu.name)
                print(f"{mu.name:28} no test matches {alternative!r}")
    print(f"{len(names)} tests; " + (f"fix the test names of: {', '.join(sorted(set(stale)))}"
                                      if stale else "every entry's tests exist"))
    return 1 if stale else 0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="list the mutations and exit")
    p.add_argument("--check", action="store_true",
                   help="check that every entry applies (its search text occurs exactly once "
                        "in its file) and exit: 1 if one does not; builds and runs nothing")
    p.add_argument("--check-tests", action="store_true",
                   help="check that every alternative of every entry's test regex matches a "
                        "test of the built tree (--build-dir) and exit: 1 if one does not")
    p.add_argument("--only", default="", help="comma-separated mutation names")
    p.add_argument("--build-dir", default="build")
    p.add_argument("-R", dest="regex", default="", help="ctest -R for every mutation")
    p.add_argument("-L", dest="label", default="", help="ctest -L")
    p.add_argument("-E", dest="exclude", default="", help="ctest -E")
    p.add_argument("--targeted", action="store_true",
                   help="per mutation, run only the tests its entry names (and -R if given)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds for one mutation's test run")
    p.add_argument("--test-timeout", type=int, default=600, help="ctest --timeout per test")
    p.add_argument("--build-timeout", type=float, default=3600.0)
    p.add_argument("-j", dest="jobs", type=int, default=1, help="ctest -j")
    p.add_argument("--no-baseline", action="store_true")
    return p.parse_args()


def main():
    args = parse_args()
    if args.list:
        for mu in MUTATIONS:
            files = ", ".join(sorted({e.path for e in mu.edits}))
            print(f"{mu.name:28} {mu.description}\n{'':28} [{files}]")
        return 0
    if args.check:
        return check_list()
    if args.check_tests:
        return check_tests(os.path.abspath(os.path.join(ROOT, args.build_dir)))
    selected = MUTATIONS
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in {mu.name for mu in MUTATIONS}]
        if unknown:
            print(f"unknown mutation(s): {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 2
        selected = [mu for mu in MUTATIONS if mu.name in names]
    args.build_dir = os.path.abspath(os.path.join(ROOT, args.build_dir))
    if not os.path.isdir(args.build_dir):
        print(f"no build directory {args.build_dir}: configure and build first",
              file=sys.stderr)
        return 2
    log_dir = os.path.join(args.build_dir, "mutate-logs")
    os.makedirs(log_dir, exist_ok=True)
    restorer = Restorer(os.path.join(args.build_dir, "mutate-backup"))
    for rel in restorer.recover_previous():
        print(f"restored {rel} from a killed earlier run")

    # SIGTERM restores like Ctrl-C does.
    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    def regex_for(mu):
        if not args.targeted:
            return args.regex
        # Plain alternation: ctest's regex engine allows only a few groups.
        return mu.tests if not args.regex else f"{mu.tests}|{args.regex}"

    results = []
    interrupted = False
    try:
        if not build(args, os.path.join(log_dir, "baseline-build.log")):
            print(f"the unmutated tree does not build (see {log_dir}/baseline-build.log)",
                  file=sys.stderr)
            return 2
        applicable = []
        for mu in selected:
            why = check_edits(mu)
            if why:
                results.append((mu, "skipped", why, 0.0))
                print(f"{mu.name:28} skipped   {why}", flush=True)
            else:
                applicable.append(mu)
        # One unmutated run over everything the mutations will run: a test failing already
        # catches nothing.
        baseline_failures = set()
        if applicable and not args.no_baseline:
            regexes = sorted({regex_for(mu) for mu in applicable})
            union = "|".join(regexes) if all(regexes) else ""
            failed, timed_out = run_tests(args, union, os.path.join(log_dir, "baseline-tests.log"),
                                          timeout=args.timeout * max(1, len(regexes)))
            if timed_out:
                print("the unmutated test run timed out: raise --timeout", file=sys.stderr)
                return 2
            baseline_failures = set(failed)
            if failed:
                print(f"(failing without any mutation, ignored: {', '.join(failed)})",
                      flush=True)
        for mu in applicable:
            start = time.time()
            try:
                apply_edits(mu, restorer)
                if not build(args, os.path.join(log_dir, f"{mu.name}-build.log")):
                    results.append((mu, "skipped", f"build failed (see mutate-logs/"
                                    f"{mu.name}-build.log)", time.time() - start))
                else:
                    failed, timed_out = run_tests(args, regex_for(mu),
                                                  os.path.join(log_dir, f"{mu.name}-tests.log"))
                    new = [t for t in failed if t not in baseline_failures]
                    if timed_out:
                        results.append((mu, "caught", "test run timed out",
                                        time.time() - start))
                    elif new:
                        shown = ", ".join(new[:3]) + (f" (+{len(new) - 3})" if len(new) > 3
                                                      else "")
                        results.append((mu, "caught", shown, time.time() - start))
                    else:
                        results.append((mu, "SURVIVED", mu.description, time.time() - start))
            finally:
                restorer.restore()
            _, status, detail, secs = results[-1]
            print(f"{mu.name:28} {status:9} {detail} [{secs:.0f} s]", flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: source restored (the build may be stale: run cmake --build)",
              file=sys.stderr)
        return 2
    finally:
        restorer.restore()
        if not interrupted and results:
            # Leave the build matching the restored source.
            build(args, os.path.join(log_dir, "final-build.log"))

    caught = sum(1 for r in results if r[1] == "caught")
    survived = [r[0].name for r in results if r[1] == "SURVIVED"]
    skipped = sum(1 for r in results if r[1] == "skipped")
    applied = caught + len(survived)
    print(f"\n{caught} of {applied} mutations caught, {len(survived)} survived"
          f"{' (' + ', '.join(survived) + ')' if survived else ''}, {skipped} skipped")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
