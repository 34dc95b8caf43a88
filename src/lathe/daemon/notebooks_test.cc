#include "lathe/daemon/notebooks.h"

#include <gtest/gtest.h>

#include "lathe/daemon/workspaces.h"

namespace lathe::daemon {
namespace {

state::RunRecord Notebook(const std::string& image_id) {
  state::RunRecord r;
  r.id = "r1";
  r.attempt = 1;
  r.kind = run::RunKind::kNotebook;
  r.run_dir = "/var/lib/lathe/runs/r1";
  r.spec.type = run::RunKind::kNotebook;
  r.spec.kernels = {"python"};
  r.spec.image = "nb";
  r.spec.image_id = image_id;
  return r;
}

TEST(ApplyNotebook, OnTheHostThePreludeIsTheProgram) {
  state::RunRecord r = Notebook("");
  exec::LaunchRequest q;
  ApplyNotebook(r.run_dir, r.spec, "/usr/bin/lathe", "tok", q);
  ASSERT_GE(q.argv.size(), 2u);
  EXPECT_EQ(q.argv[0], "/usr/bin/lathe");
  EXPECT_EQ(q.argv[1], "__notebook");
  EXPECT_TRUE(q.setup_argv.empty());
  EXPECT_EQ(q.env["JUPYTER_TOKEN"], "tok");
  ASSERT_FALSE(q.ports.empty());
  EXPECT_EQ(q.ports[0].socket, "/var/lib/lathe/runs/r1/notebook/jupyter.sock");
}

// In an image: the prelude's host half is the setup step, the image's own
// Jupyter the program; the token reaches the setup step alone, the
// container its file's name and Jupyter's directories.
TEST(ApplyNotebook, InAnImageThePreludeIsTheSetupStepAndTheImagesJupyterTheProgram) {
  state::RunRecord r = Notebook(std::string(64, 'a'));
  r.spec.kernels = {"python", "r"};
  exec::LaunchRequest q;
  ApplyNotebook(r.run_dir, r.spec, "/usr/bin/lathe", "tok", q);
  const std::string dir = "/var/lib/lathe/runs/r1/notebook";
  std::vector<std::string> setup = {
      "/usr/bin/lathe", "__notebook", "--state",      dir, "--socket", dir + "/jupyter.sock",
      "--kernels",      "python,r",   "--image-setup"};
  EXPECT_EQ(q.setup_argv, setup);
  ASSERT_EQ(q.argv.size(), 10u);
  EXPECT_EQ(q.argv[0], "/bin/sh");
  EXPECT_NE(q.argv[2].find("jupyter-notebook"), std::string::npos);
  EXPECT_EQ(q.argv[4], dir + "/jupyter.sock");
  EXPECT_EQ(q.argv[5], "r");
  EXPECT_NE(q.argv[6].find("image nb has no Jupyter"), std::string::npos);
  EXPECT_NE(q.argv[7].find("镜像 nb"), std::string::npos);
  EXPECT_EQ(q.env["JUPYTER_TOKEN"], "tok");
  EXPECT_EQ(q.setup_env_only, std::vector<std::string>{"JUPYTER_TOKEN"});
  EXPECT_EQ(q.env["JUPYTER_TOKEN_FILE"], dir + "/token");
  EXPECT_EQ(q.env["JUPYTER_RUNTIME_DIR"], dir + "/runtime");
  EXPECT_EQ(q.env["LATHE_NOTEBOOK_DIR"], dir);
}

// With a workspace too, the notebook's step execs the workspace's.
TEST(ApplyNotebook, InAnImageWithAWorkspaceTheStepsRunOneAfterTheOther) {
  state::RunRecord r = Notebook(std::string(64, 'a'));
  r.spec.workspace.dir = "/home/alice/proj";
  exec::LaunchRequest q;
  q.user.home = "/home/alice";
  ApplyNotebook(r.run_dir, r.spec, "/usr/bin/lathe", "tok", q);
  ApplyWorkspace(r, "/usr/bin/lathe", q);
  ASSERT_GT(q.setup_argv.size(), 12u);
  EXPECT_EQ(q.setup_argv[1], "__notebook");
  EXPECT_EQ(q.setup_argv[8], "--image-setup");
  EXPECT_EQ(q.setup_argv[9], "--");
  EXPECT_EQ(q.setup_argv[10], "/usr/bin/lathe");
  EXPECT_EQ(q.setup_argv[11], "__workspace");
  EXPECT_EQ(q.setup_argv.back(), "--setup-only");
  EXPECT_EQ(q.argv[0], "/bin/sh");
  EXPECT_EQ(q.workdir, "/home/alice/proj");
}

TEST(CheckNotebookSubmittable, AnImagesJupyterIsLookedForWhenItStarts) {
  run::RunSpec spec;
  spec.type = run::RunKind::kNotebook;
  spec.env["PATH"] = "/nonexistent";
  EXPECT_FALSE(CheckNotebookSubmittable(spec).ok());
  spec.image = "nb";
  EXPECT_TRUE(CheckNotebookSubmittable(spec).ok());
}

}  // namespace
}  // namespace lathe::daemon
