#include "lathe/snap/manifest.h"

#include <gtest/gtest.h>

#include "lathe/snap/checkpoints.h"
#include "lathe/snap/diff.h"
#include "lathe/snap/paths.h"

namespace lathe::snap {
namespace {

FileEntry File(const std::string& path, const std::string& content, int64_t mtime = 1) {
  FileEntry e;
  e.path = path;
  e.mode = 0644;
  e.mtime_ns = mtime;
  e.size = content.size();
  e.inode = 42;
  if (!content.empty())
    e.chunks.push_back({Sha256(content), static_cast<uint32_t>(content.size())});
  return e;
}

FileEntry Dir(const std::string& path) {
  FileEntry e;
  e.path = path;
  e.type = EntryType::kDir;
  e.mode = 0755;
  return e;
}

FileEntry Link(const std::string& path, const std::string& target) {
  FileEntry e;
  e.path = path;
  e.type = EntryType::kSymlink;
  e.target = target;
  return e;
}

Manifest Sample() {
  Manifest m;
  m.time_ms = 1700000000000;
  m.source = "/runs/r1/ckpt";
  m.tags = {{"run", "r1"}, {"step", "500"}};
  m.files = {File("a.pt", "weights"), Dir("d"), File("d/b.txt", "hello"), Link("d/l", "b.txt")};
  m.files[0].format = "pytorch-zip";
  m.files[0].check = Verdict::kOk;
  m.checkpoints = FindCheckpoints(m.files);
  m.stats.files = 2;
  return m;
}

TEST(ManifestTest, RoundTripsThroughCanonicalJson) {
  Manifest m = Sample();
  std::string json = ManifestToJson(m);
  auto back = ManifestFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ManifestToJson(*back), json);
  EXPECT_EQ(back->files.size(), 4u);
  EXPECT_EQ(back->files[3].target, "b.txt");
  EXPECT_EQ(back->files[0].chunks, m.files[0].chunks);
  EXPECT_EQ(back->tags.at("step"), "500");
}

TEST(ManifestTest, IdIsTheHashOfTheContent) {
  Manifest m = Sample();
  SnapshotId id = ManifestId(ManifestToJson(m));
  EXPECT_EQ(id.size(), 64u);
  EXPECT_EQ(ManifestId(ManifestToJson(Sample())), id);  // stable
  Manifest changed = Sample();
  changed.files[2].mode = 0600;
  EXPECT_NE(ManifestId(ManifestToJson(changed)), id);
  changed = Sample();
  changed.tags["step"] = "501";
  EXPECT_NE(ManifestId(ManifestToJson(changed)), id);
  changed = Sample();
  changed.files[0].chunks[0].id[0] ^= 1;
  EXPECT_NE(ManifestId(ManifestToJson(changed)), id);
}

TEST(ManifestTest, RejectsBadJson) {
  EXPECT_FALSE(ManifestFromJson("[]").ok());
  EXPECT_FALSE(ManifestFromJson("{\"format\":\"other\"}").ok());
  std::string json = ManifestToJson(Sample());
  json.replace(json.find("\"mode\":420"), 10, "\"mode\":\"x\"");
  EXPECT_FALSE(ManifestFromJson(json).ok());
}

TEST(PathsTest, SafeRelativePaths) {
  EXPECT_TRUE(IsSafeRelPath("a"));
  EXPECT_TRUE(IsSafeRelPath("a/b/c.pt"));
  EXPECT_TRUE(IsSafeRelPath("..a/b.."));
  for (const char* bad :
       {"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b", "a/", ".", ".."}) {
    EXPECT_FALSE(IsSafeRelPath(bad)) << bad;
  }
  EXPECT_FALSE(IsSafeRelPath(std::string("a\0b", 3)));
}

TEST(PathsTest, SymlinksMustStayInside) {
  EXPECT_TRUE(SymlinkStaysInside("l", "a/b"));
  EXPECT_TRUE(SymlinkStaysInside("d/l", "../a"));
  EXPECT_TRUE(SymlinkStaysInside("d/e/l", "../../a"));
  EXPECT_FALSE(SymlinkStaysInside("d/l", "../../a"));
  EXPECT_FALSE(SymlinkStaysInside("l", "/etc/passwd"));
  EXPECT_FALSE(SymlinkStaysInside("l", ".."));
  EXPECT_FALSE(SymlinkStaysInside("d/l", "x/../../.."));
  EXPECT_FALSE(SymlinkStaysInside("l", "b/.."));  // ".." after a name: b may itself be a link
}

TEST(PathsTest, ManifestValidation) {
  EXPECT_TRUE(ValidateManifestPaths(Sample()).ok());
  Manifest m = Sample();
  m.files.push_back(File("../evil", "x"));
  Status st = ValidateManifestPaths(m);
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_EQ(st.msg_id(), "snap.path_escape");
  m = Sample();
  m.files.push_back(Link("out", "/etc"));
  EXPECT_FALSE(ValidateManifestPaths(m).ok());
  m = Sample();
  m.files.push_back(File("d/l/x", "through the link"));
  EXPECT_FALSE(ValidateManifestPaths(m).ok());
  m = Sample();
  m.files.push_back(File("a.pt", "twice"));
  EXPECT_FALSE(ValidateManifestPaths(m).ok());
}

TEST(CheckpointsTest, DirectoriesAndFiles) {
  std::vector<FileEntry> files = {Dir("checkpoint-500"),
                                  File("checkpoint-500/model.safetensors", "m", 10),
                                  File("checkpoint-500/trainer_state.json", "{}", 11),
                                  Dir("global_step900"),
                                  File("global_step900/mp_rank_00_model_states.pt", "x", 20),
                                  File("ckpt_000700.pt", "y", 30),
                                  File("log.txt", "z", 40),
                                  Dir("tmp-checkpoint-1000"),
                                  File("tmp-checkpoint-1000/model.safetensors", "w", 50)};
  files[1].format = "safetensors";
  files[4].format = "pytorch-zip";
  files[4].check = Verdict::kIncomplete;
  files[4].reason = "truncated";
  files[5].format = "pytorch-zip";
  auto cps = FindCheckpoints(files);
  ASSERT_EQ(cps.size(), 4u);
  EXPECT_EQ(cps[0].path, "checkpoint-500");
  EXPECT_TRUE(cps[0].is_dir);
  EXPECT_EQ(cps[0].step, 500);
  EXPECT_TRUE(cps[0].complete);
  EXPECT_EQ(cps[0].mtime_ns, 11);
  EXPECT_EQ(cps[1].path, "ckpt_000700.pt");
  EXPECT_EQ(cps[1].step, 700);
  EXPECT_EQ(cps[2].path, "global_step900");
  EXPECT_FALSE(cps[2].complete);
  EXPECT_NE(cps[2].reason.find("truncated"), std::string::npos);
  EXPECT_EQ(cps[3].path, "tmp-checkpoint-1000");
  EXPECT_FALSE(cps[3].complete);

  Manifest m;
  m.files = files;
  m.checkpoints = cps;
  EXPECT_FALSE(m.complete());
  auto resume = ChooseResume(m);
  ASSERT_TRUE(resume.has_value());
  EXPECT_EQ(resume->path, "ckpt_000700.pt");  // newest complete; 900 and 1000 are incomplete
}

TEST(DiffTest, AddedRemovedModified) {
  Manifest a = Sample(), b = Sample();
  b.files[2] = File("d/b.txt", "hello, world");
  b.files.erase(b.files.begin());  // a.pt removed
  b.files.push_back(File("e.txt", "new"));
  auto d = DiffManifests(a, b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].kind, DiffEntry::Kind::kRemoved);
  EXPECT_EQ(d[0].path, "a.pt");
  EXPECT_EQ(d[1].kind, DiffEntry::Kind::kModified);
  EXPECT_EQ(d[1].new_bytes, 12u);
  EXPECT_EQ(d[2].kind, DiffEntry::Kind::kAdded);
  EXPECT_TRUE(DiffManifests(a, a).empty());
}

}  // namespace
}  // namespace lathe::snap
