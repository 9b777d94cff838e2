// The output files as a journal: whole records survive, a torn or unreadable tail is cut,
// damage in the middle is reported and the records after it kept, files that answer a
// request twice are refused, and a record survives a power cut (not just a kill) once the
// checkpoint after it returned (power_cut_files.h models the disk). The resume plan matches
// an input's requests to those records by custom_id.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "batch/batch_seed.h"
#include "batch/fnv1a.h"
#include "batch/jsonl_reader.h"
#include "batch/record_journal.h"
#include "batch/resume_plan.h"
#include "power_cut_files.h"

namespace rapide::batch {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("rapide-batch-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string record(uint64_t line, const std::string& custom_id, uint64_t digest = 7) {
  return R"({"id":")" + record_id(line, digest) + R"(","custom_id":")" + custom_id +
         R"(","response":null,"error":null})";
}

// The custom_ids `answered` holds, sorted.
std::vector<std::string> custom_ids(const AnsweredRequests& answered) {
  std::vector<std::string> ids;
  for (const auto& [id, key] : answered.by_custom_id) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(RecordJournal, RecordIdsNameTheirLineAndDigest) {
  EXPECT_EQ(record_id(42, 0xabc), "batch_req_42_0000000000000abc");
  const auto key = parse_record_id("batch_req_42_0000000000000abc");
  ASSERT_TRUE(key);
  EXPECT_EQ(key->line, 42u);
  EXPECT_EQ(key->digest, 0xabcu);
  const auto legacy = parse_record_id("batch_req_42");  // written before digests
  ASSERT_TRUE(legacy);
  EXPECT_EQ(legacy->line, 42u);
  EXPECT_FALSE(legacy->digest);
  EXPECT_FALSE(parse_record_id("batch_req_"));
  EXPECT_FALSE(parse_record_id("batch_req_4x"));
  EXPECT_FALSE(parse_record_id("batch_req_0"));
  EXPECT_FALSE(parse_record_id("batch_req_42_abc"));
  EXPECT_FALSE(parse_record_id("req_42"));
}

TEST(RecordJournal, MissingFileHasNoRecords) {
  TempDir dir;
  AnsweredRequests done;
  const Recovery r = recover_records(dir.file("absent.jsonl"), done);
  EXPECT_EQ(r.records, 0u);
  EXPECT_EQ(done.size(), 0u);
}

TEST(RecordJournal, TornLastLineIsCutAndWholeRecordsKept) {
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  const std::string whole = record(1, "a") + "\n" + record(3, "c") + "\n";
  write_file(path, whole + R"({"id":"batch_req_2","custom_id":"b","respo)");
  AnsweredRequests done;
  const Recovery r = recover_records(path, done);
  EXPECT_EQ(r.records, 2u);
  EXPECT_GT(r.truncated_bytes, 0u);
  EXPECT_EQ(read_file(path), whole);
  EXPECT_EQ(custom_ids(done), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(done.by_custom_id.at("c").line, 3u);
}

TEST(RecordJournal, WholeJsonWithoutNewlineIsStillTorn) {
  // The newline is the commit point: a record whose newline never made it is redone.
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  write_file(path, record(1, "a") + "\n" + record(2, "b"));
  AnsweredRequests done;
  recover_records(path, done);
  EXPECT_EQ(done.size(), 1u);
  EXPECT_EQ(read_file(path), record(1, "a") + "\n");
}

// Issue 18 item 18: this was reported as a torn last record, and everything after the
// damage was cut and run again.
TEST(RecordJournal, CorruptLineInTheMiddleIsReportedAndTheRecordsAfterItKept) {
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  const std::string text = record(1, "a") + "\n" + std::string(10, '\0') + "\n" + record(3, "c") +
                           "\n" + "not json\n" + record(5, "e") + "\n";
  write_file(path, text + "{\"id\":\"batch_req_6");  // and a torn tail
  AnsweredRequests done;
  const Recovery r = recover_records(path, done);
  EXPECT_EQ(r.records, 3u);
  EXPECT_EQ(r.corrupt_lines, 2u);
  EXPECT_EQ(r.truncated_bytes, std::string("{\"id\":\"batch_req_6").size());
  EXPECT_EQ(read_file(path), text);  // the damage is left, only the tail is cut
  EXPECT_EQ(custom_ids(done), (std::vector<std::string>{"a", "c", "e"}));
  // Unreadable lines at the end are a tail, whole lines or not.
  write_file(path, record(1, "a") + "\n" + std::string(10, '\0') + "\nnot json\n");
  AnsweredRequests again;
  const Recovery tail = recover_records(path, again);
  EXPECT_EQ(tail.corrupt_lines, 0u);
  EXPECT_EQ(read_file(path), record(1, "a") + "\n");
}

TEST(RecordJournal, ARequestAnsweredTwiceIsRefused) {
  TempDir dir;
  write_file(dir.file("out.jsonl"), record(1, "a") + "\n");
  write_file(dir.file("err.jsonl"), record(2, "a") + "\n");  // the same custom_id
  AnsweredRequests done;
  recover_records(dir.file("out.jsonl"), done);
  EXPECT_THROW(recover_records(dir.file("err.jsonl"), done), Error);
}

TEST(RecordJournal, WriterAppendsWholeLinesAfterRecovery) {
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  write_file(path, record(1, "a") + "\n" + "{\"id\":");
  AnsweredRequests done;
  recover_records(path, done);
  {
    RecordWriter writer(path, {.every_records = 1, .every_seconds = 0});
    writer.append(record(2, "b"));
    writer.append(record(3, "c"));
  }
  EXPECT_EQ(read_file(path), record(1, "a") + "\n" + record(2, "b") + "\n" + record(3, "c") + "\n");
}

// A SIGKILL keeps the page cache, so only a power cut shows whether the writer syncs: with
// a checkpoint every 3 records, each checkpoint leaves everything before it on disk.
TEST(RecordJournal, RecordsAreDurableOnceTheirCheckpointReturns) {
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  PowerCutFiles files;
  RecordWriter writer(path, {.every_records = 3, .every_seconds = 1e9}, files);
  std::string appended;
  for (uint64_t line = 1; line <= 7; ++line) {
    writer.append(record(line, "id"));
    appended += record(line, "id") + "\n";
    if (line % 3 == 0) {
      EXPECT_EQ(files.durable_bytes(path), appended.size()) << "record " << line;
    }
  }
  writer.sync();  // an explicit checkpoint (the runner's, at the end of a run)
  EXPECT_EQ(files.durable_bytes(path), appended.size());
  files.power_cut();
  EXPECT_EQ(read_file(path), appended);
}

TEST(RecordJournal, ATimeCheckpointSyncsToo) {
  // every_seconds = 0: the time since the last sync is always due, whatever the count.
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  PowerCutFiles files;
  RecordWriter writer(path, {.every_records = 1000, .every_seconds = 0}, files);
  writer.append(record(1, "a"));
  EXPECT_EQ(files.durable_bytes(path), record(1, "a").size() + 1);
}

TEST(RecordJournal, ClosingTheWriterSyncsWhatIsPending) {
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  PowerCutFiles files;
  {
    RecordWriter writer(path, {.every_records = 1000, .every_seconds = 1e9}, files);
    writer.append(record(1, "a"));
    writer.append(record(2, "b"));
  }
  files.power_cut();
  EXPECT_EQ(read_file(path), record(1, "a") + "\n" + record(2, "b") + "\n");
}

TEST(RecordJournal, ANewFileSurvivesAPowerCutWithItsRecords) {
  // fdatasync does not make a new file's directory entry durable: without the directory
  // sync the synced records are lost with the file.
  TempDir dir;
  const std::string path = dir.file("new.jsonl");
  PowerCutFiles files;
  RecordWriter writer(path, {.every_records = 1, .every_seconds = 1e9}, files);
  writer.append(record(1, "a"));
  files.power_cut();
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(read_file(path), record(1, "a") + "\n");
}

TEST(RecordJournal, RecordsAreWrittenBeforeTheSyncThatCoversThem) {
  // The order of the calls, as the double saw them: one write per record, and each sync
  // (every record here) comes after the write it makes durable.
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  PowerCutFiles files;
  {
    RecordWriter writer(path, {.every_records = 1, .every_seconds = 1e9}, files);
    writer.append(record(1, "a"));
    writer.append(record(2, "b"));
  }
  using E = PowerCutFiles::Event;
  std::vector<E::Kind> kinds;
  for (const E& e : files.events()) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<E::Kind>{E::kOpen, E::kSyncDirectory, E::kWrite, E::kSync,
                                         E::kWrite, E::kSync, E::kClose}));
}

TEST(JsonlReader, SkipsBlankLinesAndKeepsPhysicalLineNumbers) {
  TempDir dir;
  const std::string path = dir.file("in.jsonl");
  write_file(path, "{\"a\":1}\n\n  \n{\"b\":2}\r\n{\"c\":3}");
  JsonlReader reader(path);
  std::string line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "{\"a\":1}");
  EXPECT_EQ(reader.line_number(), 1u);
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "{\"b\":2}");
  EXPECT_EQ(reader.line_number(), 4u);
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "{\"c\":3}");
  EXPECT_EQ(reader.line_number(), 5u);
  EXPECT_FALSE(reader.next(line));
  EXPECT_THROW(JsonlReader(dir.file("absent.jsonl")), Error);
  // Issue 18 item 18: a directory read as an empty batch, and "succeeded".
  try {
    JsonlReader directory(dir.file(""));
    ADD_FAILURE() << "a directory was opened as a batch input";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

// The records an input's lines would get, for the resume plan tests.
std::string answers(const std::vector<std::pair<uint64_t, std::string>>& lines) {
  std::string text;
  for (const auto& [line, content] : lines) {
    const nlohmann::json entry = nlohmann::json::parse(content, nullptr, false);
    const bool has_id = entry.is_object() && entry.contains("custom_id");
    text += R"({"id":")" + record_id(line, fnv1a64(content)) + R"(","custom_id":)" +
            (has_id ? entry["custom_id"].dump() : "null") + R"(,"response":null,"error":null})" +
            "\n";
  }
  return text;
}

ResumePlan plan(const TempDir& dir, const std::string& input, const std::string& records) {
  write_file(dir.file("in.jsonl"), input);
  write_file(dir.file("out.jsonl"), records);
  AnsweredRequests answered;
  recover_records(dir.file("out.jsonl"), answered);
  return plan_resume(dir.file("in.jsonl"), answered, "out.jsonl");
}

// Issue 18 item 5: resume went by line number, so a reordered or edited input got answers
// attached to the wrong requests.
TEST(ResumePlan, MatchesRequestsByCustomIdWhereverTheyMoved) {
  TempDir dir;
  const std::string a = R"({"custom_id":"a","n":1})", b = R"({"custom_id":"b","n":2})",
                    c = R"({"custom_id":"c","n":3})", broken = "{broken";
  const std::string records = answers({{1, a}, {2, b}, {3, broken}});
  // New line first, then the answered ones in another order, the broken line moved.
  const ResumePlan p = plan(dir, c + "\n" + b + "\n\n" + a + "\n" + broken + "\n", records);
  EXPECT_EQ(p.total_lines, 4u);
  EXPECT_EQ(p.answered_lines, (std::unordered_set<uint64_t>{2, 4}));
  // The broken line has no custom_id: only the same bytes on the same line are answered.
  EXPECT_EQ(p.orphaned_records, 1u);
  const ResumePlan same = plan(dir, a + "\n" + b + "\n" + broken + "\n", records);
  EXPECT_EQ(same.answered_lines, (std::unordered_set<uint64_t>{1, 2, 3}));
  EXPECT_EQ(same.orphaned_records, 0u);
}

TEST(ResumePlan, DuplicateCustomIdsAndEditedAnsweredRequestsStopEverything) {
  TempDir dir;
  const std::string a = R"({"custom_id":"a","n":1})", b = R"({"custom_id":"b","n":2})";
  try {
    plan(dir, a + "\n" + b + "\n" + R"({"custom_id":"a","n":3})" + "\n", "");
    ADD_FAILURE() << "duplicate custom_ids were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("custom_id 'a' appears on lines 1 and 3"),
              std::string::npos)
        << e.what();
  }
  try {
    plan(dir, a + "\n" + R"({"custom_id":"b","n":20})" + "\n", answers({{1, a}, {2, b}}));
    ADD_FAILURE() << "an edited answered request was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2 of"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(custom_id 'b') changed"), std::string::npos) << e.what();
  }
  // Records of an earlier version (no digest) still match by custom_id.
  const ResumePlan legacy = plan(dir, a + "\n",
                                 R"({"id":"batch_req_1","custom_id":"a","response":null})"
                                 "\n");
  EXPECT_EQ(legacy.answered_lines, (std::unordered_set<uint64_t>{1}));
}

// Issue 53 mutation audit: the duplicate check skipped when the journals held answers
// survived every test, which only tried duplicates on a fresh batch. A custom_id answered by an
// earlier run that now appears on two identical lines would have both lines skipped as
// answered; one that was never answered would run twice. Both stop everything on resume too.
TEST(ResumePlan, DuplicateCustomIdsStopAResumeToo) {
  TempDir dir;
  const std::string a = R"({"custom_id":"a","n":1})", b = R"({"custom_id":"b","n":2})",
                    c = R"({"custom_id":"c","n":3})";
  const std::string records = answers({{1, a}, {2, b}});
  const auto duplicate = [&](const std::string& input) {
    try {
      plan(dir, input, records);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // The answered request, byte for byte, on lines 1 and 3 (no edit for the digest to notice).
  EXPECT_NE(
      duplicate(a + "\n" + b + "\n" + a + "\n").find("custom_id 'a' appears on lines 1 and 3"),
      std::string::npos);
  // A request no run answered yet, twice, beside answered ones.
  EXPECT_NE(duplicate(a + "\n" + c + "\n" + b + "\n" + c + "\n")
                .find("custom_id 'c' appears on lines 2 and 4"),
            std::string::npos);
  // Without the duplicate the same journals resume normally.
  EXPECT_EQ(plan(dir, a + "\n" + b + "\n" + c + "\n", records).answered_lines,
            (std::unordered_set<uint64_t>{1, 2}));
}

TEST(BatchSeed, DerivedFromTheCustomIdAsDocumented) {
  // docs/batch.md gives the formula; these values pin it (the e2e test recomputes them).
  EXPECT_EQ(derive_seed("request-1"), 0xba7f31aeabe36141ull);
  EXPECT_EQ(derive_seed(""), 0xc3817c016ba4ff30ull);
  EXPECT_NE(derive_seed("request-1"), derive_seed("request-2"));
}

}  // namespace
}  // namespace rapide::batch
