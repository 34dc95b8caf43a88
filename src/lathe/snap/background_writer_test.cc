#include "lathe/snap/background_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lathe/os/disk_space.h"
#include "lathe/snap/space_guard.h"
#include "lathe/snap/test_util/snap_files.h"

namespace lathe::snap {
namespace {

using testing::RandomBytes;
using testing::ReadAll;
using testing::TempDir;

BackgroundWriter::Options Small(bool direct) {
  BackgroundWriter::Options o;
  o.buffer_bytes = 16 * 1024;
  o.buffers = 2;
  o.direct = direct;
  return o;
}

// Appends `data` in uneven pieces, so pieces straddle buffer boundaries.
void AppendInPieces(BackgroundWriter* w, const std::string& data) {
  size_t pos = 0, step = 1;
  while (pos < data.size()) {
    size_t n = std::min(step, data.size() - pos);
    ASSERT_TRUE(w->Append(data.data() + pos, n).ok());
    pos += n;
    step = step * 3 + 7;
  }
}

class BackgroundWriterTest : public ::testing::TestWithParam<bool> {};

TEST_P(BackgroundWriterTest, FilesHoldExactlyWhatWasAppended) {
  TempDir dir;
  BackgroundWriter w(Small(GetParam()));
  // Sizes around the alignment and the buffer size: the direct tail is padded
  // to 4 KiB and must be truncated back.
  std::vector<size_t> sizes = {0, 1, 4095, 4096, 4097, 16 * 1024, 16 * 1024 + 1, 100000};
  std::vector<std::string> want;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::string path = dir / ("f" + std::to_string(i));
    ASSERT_TRUE(w.Open(path, 0444).ok());
    want.push_back(RandomBytes(sizes[i], i + 1));
    AppendInPieces(&w, want.back());
    ASSERT_TRUE(w.CloseAsync().ok());
    EXPECT_FALSE(w.file_open());
  }
  ASSERT_TRUE(w.Wait().ok());
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::string path = dir / ("f" + std::to_string(i));
    EXPECT_EQ(ReadAll(path), want[i]) << "size " << sizes[i];
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0444u);
  }
}

INSTANTIATE_TEST_SUITE_P(DirectAndBuffered, BackgroundWriterTest, ::testing::Bool());

TEST(BackgroundWriter, UsesDirectWritesWhereTheFilesystemAllowsThem) {
  TempDir dir;
  BackgroundWriter w(Small(true));
  ASSERT_TRUE(w.Open(dir / "a", 0644).ok());
  // TMPDIR is ext4 or tmpfs here, both of which take O_DIRECT.
  EXPECT_TRUE(w.direct());
  ASSERT_TRUE(w.CloseAsync().ok());
  BackgroundWriter buffered(Small(false));
  ASSERT_TRUE(buffered.Open(dir / "b", 0644).ok());
  EXPECT_FALSE(buffered.direct());
  ASSERT_TRUE(buffered.CloseAsync().ok());
  EXPECT_TRUE(w.Wait().ok());
  EXPECT_TRUE(buffered.Wait().ok());
}

// What the writer holds counts against the space guard until it is written.
TEST(BackgroundWriter, CountsUnwrittenBytes) {
  TempDir dir;
  BackgroundWriter w(Small(true));
  ASSERT_TRUE(w.Open(dir / "f", 0644).ok());
  std::string data = RandomBytes(1000, 9);
  ASSERT_TRUE(w.Append(data.data(), data.size()).ok());
  EXPECT_EQ(w.unwritten_bytes(), 1000u);  // still in the buffer
  ASSERT_TRUE(w.CloseAsync().ok());
  ASSERT_TRUE(w.Wait().ok());
  EXPECT_EQ(w.unwritten_bytes(), 0u);
}

TEST(SpaceGuard, CountsBytesAWriterStillHolds) {
  TempDir dir;
  auto avail = os::AvailableBytes(dir.path());
  ASSERT_TRUE(avail.ok());
  SpaceGuard fits(dir.path(), 0);
  EXPECT_TRUE(fits.Claim(4096).ok());
  // The filesystem reports `avail` free, but all of it is already promised
  // to writes a background thread has not made yet.
  SpaceGuard held(dir.path(), 0);
  Status st = held.Claim(4096, *avail);
  EXPECT_EQ(st.code(), Code::kResourceExhausted) << st.ToString();
}

TEST(BackgroundWriter, RefusesAnExistingFileAndMisuse) {
  TempDir dir;
  testing::WriteFile(dir / "taken", "x");
  BackgroundWriter w(Small(true));
  EXPECT_FALSE(w.Open(dir / "taken", 0644).ok());
  EXPECT_FALSE(w.Append("x", 1).ok());
  EXPECT_FALSE(w.CloseAsync().ok());
  ASSERT_TRUE(w.Open(dir / "new", 0644).ok());
  EXPECT_FALSE(w.Open(dir / "other", 0644).ok());
  ASSERT_TRUE(w.CloseAsync().ok());
  EXPECT_TRUE(w.Wait().ok());
  EXPECT_EQ(ReadAll(dir / "taken"), "x");
}

// A write error in the background thread comes back from Wait(), and the
// writer does not hang: buffers come back and later files are not written.
// The error is made with a file size limit (EFBIG once SIGXFSZ is ignored).
TEST(BackgroundWriter, ReportsABackgroundWriteError) {
  TempDir dir;
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 20000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  BackgroundWriter w(Small(true));
  ASSERT_TRUE(w.Open(dir / "big", 0644).ok());
  std::string data = RandomBytes(100000, 3);
  Status st = w.Append(data.data(), data.size());  // may already see the error
  if (st.ok()) st = w.CloseAsync();
  Status waited = w.Wait();
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(waited.ok());
  EXPECT_NE(waited.ToString().find("big"), std::string::npos) << waited.ToString();
  // After an error the writer refuses more files instead of losing them.
  if (w.file_open()) (void)w.CloseAsync();
  EXPECT_FALSE(w.Open(dir / "next", 0644).ok());
  EXPECT_NE(::access((dir / "next").c_str(), F_OK), 0);
  EXPECT_TRUE(w.Wait().ToString() == waited.ToString());
}

}  // namespace
}  // namespace lathe::snap
