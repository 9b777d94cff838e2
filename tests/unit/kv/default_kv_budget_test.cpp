// `--kv-memory auto` (kv/default_kv_budget.h): a small model gets what it needs, a large one
// the cap, a busy machine or a cgroup less; an explicit size wins; a model whose one
// full-context sequence cannot fit is refused with the numbers.
#include "kv/default_kv_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "kv/machine_memory.h"

namespace rapide {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

// stories260K in f16: 5 layers x 4 KV heads x 8 dims x 2 (K, V) x 2 bytes = 640 B a position.
KvDemand tiny_model(int sequences = 64) {
  return KvDemand{640 * 16, 16, 512, sequences};
}

// A 7B-class model with grouped-query attention: 32 layers x 8 heads x 128 x 2 x 2 = 128 KiB.
KvDemand large_model(int context = 4096) {
  return KvDemand{128 * kKiB * 16, 16, context, 64};
}

MachineMemory machine(uint64_t available) {
  MachineMemory m;
  m.mem_available = available;
  return m;
}

void expect_contains(const std::string& text, const std::string& needle) {
  EXPECT_NE(text.find(needle), std::string::npos) << "'" << needle << "' not in: " << text;
}

TEST(DefaultKvBudget, SmallModelGetsWhatFullConcurrencyNeeds) {
  const KvBudgetChoice c = default_kv_budget(tiny_model(), machine(20 * kGiB));
  EXPECT_TRUE(c.automatic);
  EXPECT_EQ(c.bytes, 512u * 64 * 640);  // 20 MiB, not the old fixed 1 GiB
  EXPECT_EQ(c.explanation,
            "20.00 MiB (context 512 x 64 sequences x 640 B/token; 20.00 GiB available)");
}

TEST(DefaultKvBudget, TheBusyMomentOfIssue51StartsNow) {
  // 582.8 MiB available refused the fixed 1 GiB; the tiny model needs 20 MiB.
  const KvBudgetChoice c = default_kv_budget(tiny_model(), machine(5828 * kMiB / 10));
  EXPECT_EQ(c.bytes, 20 * kMiB);
}

TEST(DefaultKvBudget, ContextRoundsUpToWholeBlocks) {
  KvDemand d = tiny_model(2);
  d.context = 100;  // 7 blocks of 16
  EXPECT_EQ(default_kv_budget(d, machine(20 * kGiB)).bytes, 2u * 7 * 16 * 640);
}

TEST(DefaultKvBudget, LargeDemandIsCappedAtTheOldDefault) {
  const KvBudgetChoice c = default_kv_budget(large_model(), machine(200 * kGiB));
  EXPECT_EQ(c.bytes, kGiB);
  expect_contains(c.explanation,
                  "1.00 GiB (capped: context 4096 x 64 sequences x 128.0 "
                  "KiB/token would take 32.00 GiB; 2 sequences at full context");
  expect_contains(c.explanation, "--kv-memory SIZE for more");
  // batch's cap
  EXPECT_EQ(default_kv_budget(large_model(), machine(200 * kGiB), 2 * kGiB).bytes, 2 * kGiB);
}

TEST(DefaultKvBudget, OneSequenceAboveTheCapStillGetsItsContext) {
  // 128K positions x 128 KiB = 16 GiB for one sequence: the cap gives way, concurrency does not.
  const KvBudgetChoice c = default_kv_budget(large_model(131072), machine(200 * kGiB));
  EXPECT_EQ(c.bytes, 16 * kGiB);
  expect_contains(c.explanation, "one sequence at full context, above the 1.00 GiB cap");
}

TEST(DefaultKvBudget, LowAvailableMemoryShrinksIt) {
  // 100 MiB available: three quarters, in whole blocks (a context of 256: 32 MiB a sequence).
  const KvBudgetChoice c = default_kv_budget(large_model(256), machine(100 * kMiB));
  EXPECT_LE(c.bytes, 75 * kMiB);
  EXPECT_GT(c.bytes, 75 * kMiB - 2 * kMiB);  // less one block (2 MiB) at most
  EXPECT_EQ(c.bytes % (128 * kKiB * 16), 0u);
  expect_contains(c.explanation, "limited by memory");
  expect_contains(c.explanation, "three quarters of 100.0 MiB available; 2 sequences at full");
  // The tiny model's full demand fits the same machine untouched.
  EXPECT_EQ(default_kv_budget(tiny_model(), machine(100 * kMiB)).bytes, 20 * kMiB);
  // And shrinks below it: 16 MiB available leaves 12 MiB, 38 of the 64 sequences.
  const KvBudgetChoice tight = default_kv_budget(tiny_model(), machine(16 * kMiB));
  EXPECT_EQ(tight.bytes, 12 * kMiB / (640 * 16) * (640 * 16));
  expect_contains(tight.explanation, "38 sequences at full context");
}

TEST(DefaultKvBudget, CgroupLimitIsRespected) {
  MachineMemory m = machine(20 * kGiB);
  m.cgroup_limit = 512 * kMiB;
  m.cgroup_usage = 384 * kMiB;  // 128 MiB left in the container
  EXPECT_TRUE(m.cgroup_binds());
  const KvBudgetChoice c = default_kv_budget(large_model(256), m);
  EXPECT_EQ(c.bytes, 96 * kMiB);  // three quarters of 128 MiB, 48 blocks of 2 MiB
  expect_contains(c.explanation, "128.0 MiB available under the cgroup's memory limit");
  // A container at its limit has nothing to give.
  m.cgroup_usage = 600 * kMiB;
  EXPECT_EQ(m.can_give(), 0u);
  EXPECT_THROW(default_kv_budget(tiny_model(), m), Error);
  // A limit above MemAvailable does not bind.
  m.cgroup_limit = 64 * kGiB;
  m.cgroup_usage = 0;
  EXPECT_FALSE(m.cgroup_binds());
  EXPECT_EQ(m.can_give(), 20 * kGiB);
}

TEST(DefaultKvBudget, UnknownMemoryLeavesTheModelAndTheCap) {
  const MachineMemory unknown;
  EXPECT_FALSE(unknown.can_give());
  EXPECT_EQ(default_kv_budget(tiny_model(), unknown).bytes, 20 * kMiB);
  const KvBudgetChoice big = default_kv_budget(large_model(), unknown);
  EXPECT_EQ(big.bytes, kGiB);
  expect_contains(big.explanation, "available memory unknown");
}

TEST(DefaultKvBudget, OneSequenceThatDoesNotFitGetsWhatTheMemoryAllows) {
  // 128K x 128 KiB = 16 GiB for one sequence; 8 GiB available gives the KV cache 6 GiB:
  // 49152 positions, and the explanation says longer requests are refused.
  const KvBudgetChoice c = default_kv_budget(large_model(131072), machine(8 * kGiB));
  EXPECT_EQ(c.bytes, 6 * kGiB);
  EXPECT_TRUE(c.automatic);
  EXPECT_TRUE(c.short_of_context);
  expect_contains(c.explanation, "one sequence at full context needs 16.00 GiB");
  expect_contains(c.explanation, "holds 49152 positions");
  expect_contains(c.explanation, "--ctx-size 49152");
  EXPECT_FALSE(default_kv_budget(large_model(131072), machine(64 * kGiB)).short_of_context);
}

TEST(DefaultKvBudget, FewerThanTheMinimumPositionsIsRefusedWithTheNumbers) {
  // 1 GiB available gives 768 MiB: 6144 positions of 128 KiB... and 100 MiB gives 75 MiB,
  // 600 positions, under kMinAutoPositions.
  EXPECT_NO_THROW(default_kv_budget(large_model(131072), machine(kGiB)));
  try {
    default_kv_budget(large_model(131072), machine(100 * kMiB));
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kExceedsCapacity);
    const std::string m = e.what();
    expect_contains(m, "one sequence at full context needs 16.00 GiB of KV cache");
    expect_contains(m, "context 131072 x 128.0 KiB/token");
    expect_contains(m, "only 75.00 MiB (three quarters of 100.0 MiB available)");
    expect_contains(m, "less than 2048 positions");
    expect_contains(m, "--kv-memory SIZE");
    expect_contains(m, "--ctx-size");
  }
}

TEST(DefaultKvBudget, RunAndChatProvideForOneSequence) {
  EXPECT_EQ(default_kv_budget(tiny_model(1), machine(20 * kGiB)).bytes, 512u * 640);
}

TEST(DefaultKvBudget, EmptyDemandIsABug) {
  KvDemand d = tiny_model();
  d.block_bytes = 0;
  EXPECT_THROW(default_kv_budget(d, machine(kGiB)), Error);
}

TEST(ChooseKvBudget, AutoIsTheRuleInAnySpelling) {
  for (const char* text : {"auto", "AUTO", " Auto\n"}) {
    const KvBudgetChoice c = choose_kv_budget(text, tiny_model(), machine(20 * kGiB));
    EXPECT_TRUE(c.automatic) << text;
    EXPECT_EQ(c.bytes, 20 * kMiB) << text;
  }
  EXPECT_FALSE(is_auto_kv_memory("automatic"));
  EXPECT_FALSE(is_auto_kv_memory(""));
}

TEST(ChooseKvBudget, AnExplicitSizeWins) {
  // More than the model could use, and less than one sequence: both as given.
  const KvBudgetChoice more = choose_kv_budget("3GiB", tiny_model(), machine(20 * kGiB));
  EXPECT_FALSE(more.automatic);
  EXPECT_EQ(more.bytes, 3 * kGiB);
  EXPECT_TRUE(more.explanation.empty());
  EXPECT_EQ(choose_kv_budget("160KiB", large_model(), machine(20 * kGiB)).bytes, 160 * kKiB);
  // A fraction is of MemAvailable; an explicit size may take all of it (no margin).
  EXPECT_EQ(choose_kv_budget("0.5", tiny_model(), machine(20 * kGiB)).bytes, 10 * kGiB);
  EXPECT_EQ(choose_kv_budget("20GiB", tiny_model(), machine(20 * kGiB)).bytes, 20 * kGiB);
}

TEST(ChooseKvBudget, AnExplicitSizeBeyondTheMachineStillFails) {
  try {
    choose_kv_budget("1GiB", tiny_model(), machine(5828 * kMiB / 10));
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kExceedsCapacity);
    expect_contains(e.what(), "this machine can give only 582.8 MiB");
  }
}

TEST(ChooseKvBudget, AMalformedSizeMentionsAuto) {
  try {
    choose_kv_budget("lots", tiny_model(), machine(kGiB));
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    expect_contains(e.what(), "bad KV memory budget 'lots'");
    expect_contains(e.what(), "or auto");
  }
}

}  // namespace
}  // namespace rapide
