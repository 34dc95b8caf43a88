// The spec's notebook fields (type notebook, kernels, idle) and the
// prelude's Jupyter config.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "lathe/os/files.h"
#include "lathe/run/notebook_prelude.h"
#include "lathe/run/spec.h"

namespace lathe::run {
namespace {

Result<RunSpec> Parse(const char* json) { return SpecFromJson(Json::parse(json)); }

TEST(NotebookSpec, NeedsNoCommandAndDefaultsToPython) {
  auto s = Parse(R"({"type":"notebook","gpus":1})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(IsNotebookSpec(*s));
  EXPECT_EQ(s->kernels, (std::vector<std::string>{"python"}));
  EXPECT_EQ(s->idle_ms, -1);  // the daemon's default
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *s);
}

TEST(NotebookSpec, KernelsAndIdleRoundTrip) {
  auto s = Parse(R"({"type":"notebook","kernels":["python","r","r"],"idle":"90s"})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kernels, (std::vector<std::string>{"python", "r"}));
  EXPECT_EQ(s->idle_ms, 90'000);
  auto off = Parse(R"({"type":"notebook","idle":0})");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->idle_ms, 0);  // never stopped for idleness
  auto back = SpecFromJson(SpecToJson(*off));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->idle_ms, 0);
}

TEST(NotebookSpec, BadValuesNameTheField) {
  struct Case {
    const char* json;
    const char* id;
    const char* says;
  } cases[] = {
      {R"({"type":"notebook","kernels":["julia"]})", "spec.bad_kernel", "kernels[0]"},
      {R"({"type":"notebook","kernels":[]})", "spec.wrong_type", "kernels"},
      {R"({"type":"notebook","idle":"soon"})", "spec.bad_duration", "idle"},
      {R"({"type":"notebook","command":["jupyter"]})", "spec.notebook_command", "command"},
      {R"({"command":["a"],"kernels":["python"]})", "spec.notebook_only", "kernels"},
      {R"({"command":["a"],"idle":"1m"})", "spec.notebook_only", "idle"},
      {R"({"type":"server","command":["a"]})", "spec.bad_type", "notebook"},
      {R"({"type":"service","command":["a"]})", "spec.service_deployment", "lathe deploy create"},
  };
  for (const auto& c : cases) {
    auto s = Parse(c.json);
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_EQ(s.status().msg_id(), c.id) << c.json;
    EXPECT_NE(s.status().message().find(c.says), std::string::npos) << s.status().message();
  }
}

TEST(NotebookPrelude, FindsJupyterInPathOrder) {
  EXPECT_EQ(FindOnPath("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(FindOnPath("sh", "relative:/nonexistent"), "");
  EXPECT_EQ(FindJupyter("/nonexistent"), "");
}

TEST(NotebookPrelude, ConfigListensOnTheSocketOnlyWithTheKernelsAsked) {
  Json nb =
      JupyterConfig("/usr/bin/jupyter-notebook", "/r/nb/jupyter.sock", "/home/u", {"ir"}, false);
  EXPECT_EQ(nb["NotebookApp"]["sock"], "/r/nb/jupyter.sock");
  EXPECT_EQ(nb["NotebookApp"]["sock_mode"], "0600");
  EXPECT_EQ(nb["NotebookApp"]["notebook_dir"], "/home/u");
  EXPECT_EQ(nb["NotebookApp"]["open_browser"], false);
  EXPECT_EQ(nb["KernelSpecManager"]["allowed_kernelspecs"], Json::array({"ir"}));
  EXPECT_EQ(nb["KernelSpecManager"]["ensure_native_kernel"], false);
  EXPECT_FALSE(nb.contains("ServerApp"));
  EXPECT_EQ(nb["KernelManager"]["transport"], "ipc");
  Json lab = JupyterConfig("/usr/bin/jupyter-lab", "/s", "/w", {"python3"}, true);
  EXPECT_EQ(lab["ServerApp"]["root_dir"], "/w");
  EXPECT_EQ(lab["ServerApp"]["allow_root"], true);
  EXPECT_EQ(lab["KernelSpecManager"]["ensure_native_kernel"], true);
  EXPECT_EQ(lab["KernelManager"]["transport"], "ipc");
}

TEST(NotebookPrelude, PythonConfigNamesShortKernelSocketsForEachServer) {
  for (bool notebook6 : {true, false}) {
    std::string py = JupyterPyConfig(notebook6);
    EXPECT_NE(py.find(notebook6 ? "_SERVER = False\n" : "_SERVER = True\n"), std::string::npos);
    EXPECT_NE(py.find("c.MappingKernelManager.kernel_manager_class = "
                      "\"lathe_notebook_kernels.KernelManager\""),
              std::string::npos);
    EXPECT_NE(py.find("c.AsyncMappingKernelManager.kernel_manager_class"), std::string::npos);
    EXPECT_NE(py.find("\"k%d\""), std::string::npos);
  }
  // jupyter-notebook 6 finds the tokenless page first; jupyter_server has no such page.
  EXPECT_NE(JupyterPyConfig(true).find("c.NotebookApp.extra_template_paths"), std::string::npos);
  EXPECT_EQ(JupyterPyConfig(false).find("extra_template_paths"), std::string::npos);
  EXPECT_NE(std::string(kTokenlessPage).find("{%- set token = \"\" -%}"), std::string::npos);
  // ipykernel's pipe on a unix socket in the runtime directory.
  EXPECT_NE(std::string(kIpythonKernelConfig).find("pipe_in.bind(\"ipc://\""), std::string::npos);
  // "/k9999-9", "/p4194304" (the largest pid): the runtime directory's budget leaves room.
  EXPECT_LE(std::string("/k9999-9").size(), kKernelSocketName);
  EXPECT_EQ(std::string("/p4194304").size(), kKernelSocketName);
}

// A notebook in an image: the host half writes the state, the token's file
// and both servers' configs (which Jupyter the image has is known only in
// it), with no root directory (Jupyter's is the container's working
// directory), and stops there when nothing follows `--`.
TEST(NotebookPrelude, ImageSetupPreparesBothConfigsAndTheTokenFile) {
  char tmpl[] = "/tmp/lathe-nb-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string state = std::string(tmpl) + "/notebook";
  ASSERT_TRUE(os::MakeDirs(state, 0700).ok());
  ::setenv("JUPYTER_TOKEN", "t0k", 1);
  EXPECT_EQ(NotebookMain({"--state", state, "--socket", state + "/jupyter.sock", "--kernels",
                          "python,r", "--image-setup"}),
            0);
  EXPECT_EQ(std::getenv("JUPYTER_TOKEN"), nullptr);
  EXPECT_EQ(os::ReadFile(state + "/token").value_or(""), "t0k");
  Json nb =
      Json::parse(os::ReadFile(state + "/config/jupyter_notebook_config.json").value_or("{}"));
  Json srv = Json::parse(os::ReadFile(state + "/config/jupyter_server_config.json").value_or("{}"));
  EXPECT_EQ(nb["NotebookApp"]["sock"], state + "/jupyter.sock");
  EXPECT_FALSE(nb["NotebookApp"].contains("notebook_dir"));
  EXPECT_EQ(nb["NotebookApp"]["allow_root"], ::geteuid() == 0);
  EXPECT_EQ(srv["ServerApp"]["sock"], state + "/jupyter.sock");
  EXPECT_FALSE(srv["ServerApp"].contains("root_dir"));
  EXPECT_EQ(srv["KernelSpecManager"]["allowed_kernelspecs"], Json::array({"python3", "ir"}));
  // R is looked for in the image, not here: the spec is written all the same.
  EXPECT_TRUE(os::ReadFile(state + "/data/kernels/ir/kernel.json").ok());
  EXPECT_TRUE(os::ReadFile(state + "/config/templates/page.html").ok());
  ::unsetenv("JUPYTER_TOKEN_FILE");
  (void)os::RemoveAll(tmpl);
}

TEST(NotebookPrelude, ImageSetupNeedsItsStateAndSomethingAfterTheSeparator) {
  EXPECT_EQ(NotebookMain({"--state", "/x", "--socket", "/x/s", "--image-setup", "--"}), 2);
  EXPECT_EQ(NotebookMain({"--state", "/x", "--socket", "/x/s", "--", "true"}), 2);
  EXPECT_EQ(NotebookMain({"--state", "/x", "--socket"}), 2);
}

}  // namespace
}  // namespace lathe::run
