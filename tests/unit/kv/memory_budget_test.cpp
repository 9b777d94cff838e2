// --kv-memory parsing: absolute sizes in binary and decimal units, plain bytes, fractions
// of MemAvailable, and errors that say what is accepted.
#include "kv/memory_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace rapide {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
constexpr uint64_t kAvailable = 8 * kGiB;

uint64_t parse(const std::string& text) {
  return parse_memory_budget(text, kAvailable);
}

void expect_rejected(const std::string& text, const std::string& needle) {
  try {
    parse(text);
    ADD_FAILURE() << "'" << text << "' should be rejected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MemoryBudget, BinaryUnits) {
  EXPECT_EQ(parse("2GiB"), 2 * kGiB);
  EXPECT_EQ(parse("512MiB"), 512 * kMiB);
  EXPECT_EQ(parse("64KiB"), 64 * kKiB);
  EXPECT_EQ(parse("1TiB"), 1024 * kGiB);
  EXPECT_EQ(parse("1.5G"), 3 * kGiB / 2);
  EXPECT_EQ(parse("512M"), 512 * kMiB);
  EXPECT_EQ(parse("4k"), 4 * kKiB);
}

TEST(MemoryBudget, DecimalUnitsCaseAndSpaces) {
  EXPECT_EQ(parse("2GB"), 2000000000u);
  EXPECT_EQ(parse("500mb"), 500000000u);
  EXPECT_EQ(parse("  2gIb "), 2 * kGiB);
}

TEST(MemoryBudget, PlainBytes) {
  EXPECT_EQ(parse("1048576"), kMiB);
  EXPECT_EQ(parse("4096B"), 4096u);
  EXPECT_EQ(parse(" 2GiB\n"), 2 * kGiB);
}

TEST(MemoryBudget, FractionsOfAvailableMemory) {
  EXPECT_EQ(parse("0.5"), 4 * kGiB);
  EXPECT_EQ(parse("0.25"), 2 * kGiB);
  EXPECT_EQ(parse("1"), kAvailable);
  EXPECT_EQ(parse("50%"), 4 * kGiB);
  EXPECT_EQ(parse("100%"), kAvailable);
  // Without an explicit MemAvailable the real one is read from /proc/meminfo.
  const uint64_t available = mem_available_bytes();
  EXPECT_GT(available, 0u);
  const uint64_t half = parse_memory_budget("0.5");
  EXPECT_GT(half, 0u);
  EXPECT_LE(half, available);
}

TEST(MemoryBudget, ClearErrors) {
  expect_rejected("", "empty");
  expect_rejected("lots", "expected a size such as 2GiB");
  expect_rejected("-1GiB", "bad KV memory budget '-1GiB'");
  expect_rejected("0", "bad KV memory budget");
  expect_rejected("0GiB", "bad KV memory budget");
  expect_rejected("2XB", "unknown unit 'xb'");
  expect_rejected("2 gib", "unknown unit ' gib'");
  expect_rejected("1.5", "neither a fraction in (0, 1] nor a whole byte count");
  expect_rejected("150%", "more than 100%");
  expect_rejected("0.1B", "rounds to 0 bytes");
  expect_rejected("1e9", "unknown unit");
  expect_rejected("99999999TiB", "too large");
  EXPECT_THROW(parse_memory_budget("0.0000000001", 1000), Error);
}

TEST(MemoryBudget, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(20 * kKiB), "20.00 KiB");
  EXPECT_EQ(format_bytes(512 * kMiB), "512.0 MiB");
  EXPECT_EQ(format_bytes(2 * kGiB), "2.00 GiB");
}

TEST(MemoryBudget, ABudgetAboveWhatTheMachineCanGiveFailsWithBothSizes) {
  const uint64_t gib = uint64_t{1} << 30;
  EXPECT_NO_THROW(check_budget_fits(2 * gib, 2 * gib));
  try {
    check_budget_fits(3 * gib, 2 * gib);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kExceedsCapacity);
    EXPECT_NE(std::string(e.what()).find("3.00 GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("only 2.00 GiB"), std::string::npos) << e.what();
  }
  // Whatever this machine has, it has some memory left and less than an exabyte.
  EXPECT_GT(memory_limit_bytes(), 0u);
  EXPECT_LT(memory_limit_bytes(), uint64_t{1} << 60);
}

}  // namespace
}  // namespace rapide
