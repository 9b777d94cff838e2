// The output files as a journal: whole records survive, a torn or unreadable tail is cut,
// files that answer a line twice are refused, and a record survives a power cut (not just
// a kill) once the checkpoint after it returned (power_cut_files.h models the disk).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "batch/batch_seed.h"
#include "batch/jsonl_reader.h"
#include "batch/record_journal.h"
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

std::string record(uint64_t line, const std::string& custom_id) {
  return R"({"id":")" + record_id(line) + R"(","custom_id":")" + custom_id +
         R"(","response":null,"error":null})";
}

TEST(RecordJournal, RecordIdsNameTheirLine) {
  EXPECT_EQ(record_id(42), "batch_req_42");
  EXPECT_EQ(line_of_record_id("batch_req_42"), 42u);
  EXPECT_FALSE(line_of_record_id("batch_req_"));
  EXPECT_FALSE(line_of_record_id("batch_req_4x"));
  EXPECT_FALSE(line_of_record_id("batch_req_0"));
  EXPECT_FALSE(line_of_record_id("req_42"));
}

TEST(RecordJournal, MissingFileHasNoRecords) {
  TempDir dir;
  DoneLines done;
  const Recovery r = recover_records(dir.file("absent.jsonl"), done);
  EXPECT_EQ(r.records, 0u);
  EXPECT_TRUE(done.empty());
}

TEST(RecordJournal, TornLastLineIsCutAndWholeRecordsKept) {
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  const std::string whole = record(1, "a") + "\n" + record(3, "c") + "\n";
  write_file(path, whole + R"({"id":"batch_req_2","custom_id":"b","respo)");
  DoneLines done;
  const Recovery r = recover_records(path, done);
  EXPECT_EQ(r.records, 2u);
  EXPECT_GT(r.truncated_bytes, 0u);
  EXPECT_EQ(read_file(path), whole);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done.at(1), "a");
  EXPECT_EQ(done.at(3), "c");
  EXPECT_FALSE(done.contains(2));
}

TEST(RecordJournal, WholeJsonWithoutNewlineIsStillTorn) {
  // The newline is the commit point: a record whose newline never made it is redone.
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  write_file(path, record(1, "a") + "\n" + record(2, "b"));
  DoneLines done;
  recover_records(path, done);
  EXPECT_EQ(done.size(), 1u);
  EXPECT_EQ(read_file(path), record(1, "a") + "\n");
}

TEST(RecordJournal, UnreadableRecordCutsEverythingAfterIt) {
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  write_file(path, record(1, "a") + "\n" + std::string(10, '\0') + "\n" + record(2, "b") + "\n");
  DoneLines done;
  const Recovery r = recover_records(path, done);
  EXPECT_EQ(r.records, 1u);
  EXPECT_EQ(read_file(path), record(1, "a") + "\n");
}

TEST(RecordJournal, ALineAnsweredTwiceIsRefused) {
  TempDir dir;
  write_file(dir.file("out.jsonl"), record(1, "a") + "\n");
  write_file(dir.file("err.jsonl"), record(1, "a") + "\n");
  DoneLines done;
  recover_records(dir.file("out.jsonl"), done);
  EXPECT_THROW(recover_records(dir.file("err.jsonl"), done), Error);
}

TEST(RecordJournal, WriterAppendsWholeLinesAfterRecovery) {
  TempDir dir;
  const std::string path = dir.file("out.jsonl");
  write_file(path, record(1, "a") + "\n" + "{\"id\":");
  DoneLines done;
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
  EXPECT_EQ(count_jsonl_lines(path), 3u);
  EXPECT_THROW(JsonlReader(dir.file("absent.jsonl")), Error);
}

TEST(BatchSeed, DerivedFromTheCustomIdAsDocumented) {
  // docs/batch.md gives the formula; these values pin it (the e2e test recomputes them).
  EXPECT_EQ(derive_seed("request-1"), 0xba7f31aeabe36141ull);
  EXPECT_EQ(derive_seed(""), 0xc3817c016ba4ff30ull);
  EXPECT_NE(derive_seed("request-1"), derive_seed("request-2"));
}

}  // namespace
}  // namespace rapide::batch
