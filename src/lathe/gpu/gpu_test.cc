#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "lathe/gpu/inventory.h"
#include "lathe/gpu/nvml.h"
#include "lathe/gpu/nvml_source.h"
#include "lathe/gpu/sim_load.h"
#include "lathe/gpu/simulated_source.h"
#include "lathe/gpu/source.h"

namespace lathe::gpu {
namespace {

// ---- A fake NVML: static functions answering from one global state ----------

struct FakeGpu {
  const char* uuid;
  const char* name;
  const char* bus_id;
  nvmlMemory_t memory;
  nvmlUtilization_t util;
  unsigned int temp_c, sm_mhz, sm_max_mhz;
  unsigned long long throttle;
  nvmlEnableState_t ecc;
  unsigned long long ecc_uncorrected;
  unsigned int mig;
  nvmlEnableState_t persistence;
  unsigned int power_mw, limit_mw;
  std::vector<nvmlProcessInfo_t> processes;
  nvmlReturn_t handle_rc = NVML_SUCCESS;
};

struct FakeNvml {
  nvmlReturn_t init_rc = NVML_SUCCESS;
  int inits = 0, shutdowns = 0;
  std::vector<FakeGpu> gpus;
};
FakeNvml g_fake;

FakeGpu* Dev(nvmlDevice_t d) { return &g_fake.gpus[reinterpret_cast<uintptr_t>(d) - 1]; }

void Copy(char* dst, unsigned int len, const char* src) {
  std::strncpy(dst, src, len - 1);
  dst[len - 1] = '\0';
}

nvmlReturn_t FakeInit() {
  ++g_fake.inits;
  return g_fake.init_rc;
}
nvmlReturn_t FakeShutdown() {
  ++g_fake.shutdowns;
  return NVML_SUCCESS;
}
const char* FakeErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}
nvmlReturn_t FakeDriverVersion(char* v, unsigned int len) {
  Copy(v, len, "550.54.15");
  return NVML_SUCCESS;
}
nvmlReturn_t FakeCudaVersion(int* v) {
  *v = 12040;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeCount(unsigned int* n) {
  *n = static_cast<unsigned int>(g_fake.gpus.size());
  return NVML_SUCCESS;
}
nvmlReturn_t FakeHandle(unsigned int i, nvmlDevice_t* d) {
  if (i >= g_fake.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (g_fake.gpus[i].handle_rc != NVML_SUCCESS) return g_fake.gpus[i].handle_rc;
  *d = reinterpret_cast<nvmlDevice_t>(uintptr_t{i} + 1);
  return NVML_SUCCESS;
}
nvmlReturn_t FakeUuid(nvmlDevice_t d, char* s, unsigned int len) {
  Copy(s, len, Dev(d)->uuid);
  return NVML_SUCCESS;
}
nvmlReturn_t FakeName(nvmlDevice_t d, char* s, unsigned int len) {
  Copy(s, len, Dev(d)->name);
  return NVML_SUCCESS;
}
nvmlReturn_t FakePci(nvmlDevice_t d, nvmlPciInfo_t* p) {
  Copy(p->busId, sizeof p->busId, Dev(d)->bus_id);
  return NVML_SUCCESS;
}
nvmlReturn_t FakeMemory(nvmlDevice_t d, nvmlMemory_t* m) {
  *m = Dev(d)->memory;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeUtil(nvmlDevice_t d, nvmlUtilization_t* u) {
  *u = Dev(d)->util;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeTemp(nvmlDevice_t d, nvmlTemperatureSensors_t s, unsigned int* t) {
  if (s != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *t = Dev(d)->temp_c;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeClock(nvmlDevice_t d, nvmlClockType_t t, unsigned int* mhz) {
  if (t != NVML_CLOCK_SM) return NVML_ERROR_INVALID_ARGUMENT;
  *mhz = Dev(d)->sm_mhz;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeMaxClock(nvmlDevice_t d, nvmlClockType_t t, unsigned int* mhz) {
  if (t != NVML_CLOCK_SM) return NVML_ERROR_INVALID_ARGUMENT;
  *mhz = Dev(d)->sm_max_mhz;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeThrottle(nvmlDevice_t d, unsigned long long* r) {
  *r = Dev(d)->throttle;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeEccMode(nvmlDevice_t d, nvmlEnableState_t* cur, nvmlEnableState_t* pending) {
  *cur = *pending = Dev(d)->ecc;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeEccErrors(nvmlDevice_t d, nvmlMemoryErrorType_t t, nvmlEccCounterType_t c,
                           unsigned long long* n) {
  if (t != NVML_MEMORY_ERROR_TYPE_UNCORRECTED || c != NVML_VOLATILE_ECC) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (Dev(d)->ecc != NVML_FEATURE_ENABLED) return NVML_ERROR_NOT_SUPPORTED;
  *n = Dev(d)->ecc_uncorrected;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeMig(nvmlDevice_t d, unsigned int* cur, unsigned int* pending) {
  *cur = *pending = Dev(d)->mig;
  return NVML_SUCCESS;
}
// Behaves like NVML: reports the needed size when the buffer is too small.
nvmlReturn_t FakeProcesses(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_t* infos) {
  const auto& procs = Dev(d)->processes;
  if (*n < procs.size()) {
    *n = static_cast<unsigned int>(procs.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *n = static_cast<unsigned int>(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) infos[i] = procs[i];
  return NVML_SUCCESS;
}
nvmlReturn_t FakePersistence(nvmlDevice_t d, nvmlEnableState_t* m) {
  *m = Dev(d)->persistence;
  return NVML_SUCCESS;
}
nvmlReturn_t FakePower(nvmlDevice_t d, unsigned int* mw) {
  *mw = Dev(d)->power_mw;
  return NVML_SUCCESS;
}
nvmlReturn_t FakeLimit(nvmlDevice_t d, unsigned int* mw) {
  *mw = Dev(d)->limit_mw;
  return NVML_SUCCESS;
}

NvmlApi FakeApi() {
  NvmlApi api;
  api.init_v2 = FakeInit;
  api.shutdown = FakeShutdown;
  api.error_string = FakeErrorString;
  api.system_get_driver_version = FakeDriverVersion;
  api.system_get_cuda_driver_version_v2 = FakeCudaVersion;
  api.device_get_count_v2 = FakeCount;
  api.device_get_handle_by_index_v2 = FakeHandle;
  api.device_get_uuid = FakeUuid;
  api.device_get_name = FakeName;
  api.device_get_pci_info_v3 = FakePci;
  api.device_get_memory_info = FakeMemory;
  api.device_get_utilization_rates = FakeUtil;
  api.device_get_temperature = FakeTemp;
  api.device_get_clock_info = FakeClock;
  api.device_get_max_clock_info = FakeMaxClock;
  api.device_get_current_clocks_throttle_reasons = FakeThrottle;
  api.device_get_ecc_mode = FakeEccMode;
  api.device_get_total_ecc_errors = FakeEccErrors;
  api.device_get_mig_mode = FakeMig;
  api.device_get_compute_running_processes_v3 = FakeProcesses;
  api.device_get_persistence_mode = FakePersistence;
  api.device_get_power_usage = FakePower;
  api.device_get_enforced_power_limit = FakeLimit;
  return api;
}

constexpr unsigned long long kGiB = 1ULL << 30;

// GPU 0: a quiet, healthy A100. GPU 1: a hot H100, thermally throttled, with
// uncorrected ECC errors, MIG on and two processes (one without a memory figure).
void ResetFake() {
  g_fake = FakeNvml{};
  g_fake.gpus.push_back(FakeGpu{"GPU-aaaa-0000",
                                "NVIDIA A100-SXM4-40GB",
                                "00000000:07:00.0",
                                {40 * kGiB, 39 * kGiB, 1 * kGiB},
                                {0, 0},
                                34,
                                210,
                                1410,
                                nvmlClocksThrottleReasonGpuIdle,
                                NVML_FEATURE_ENABLED,
                                0,
                                NVML_DEVICE_MIG_DISABLE,
                                NVML_FEATURE_ENABLED,
                                61000,
                                400000,
                                {}});
  g_fake.gpus.push_back(
      FakeGpu{"GPU-bbbb-1111",
              "NVIDIA H100 80GB HBM3",
              "00000000:3B:00.0",
              {80 * kGiB, 10 * kGiB, 70 * kGiB},
              {97, 55},
              91,
              1095,
              1980,
              nvmlClocksThrottleReasonSwThermalSlowdown | nvmlClocksThrottleReasonHwSlowdown,
              NVML_FEATURE_ENABLED,
              3,
              NVML_DEVICE_MIG_ENABLE,
              NVML_FEATURE_DISABLED,
              699500,
              700000,
              {{4242, 60 * kGiB, 0xFFFFFFFF, 0xFFFFFFFF}, {4343, NVML_VALUE_NOT_AVAILABLE, 1, 0}}});
}

class NvmlSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { ResetFake(); }
};

TEST_F(NvmlSourceTest, TwoGpusAllFields) {
  auto source = NvmlSource::Create(FakeApi());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto inv = (*source)->Sample();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->source, "nvml");
  EXPECT_FALSE(inv->simulated);
  EXPECT_EQ(inv->driver_version, "550.54.15");
  EXPECT_EQ(inv->cuda_driver_version, "12.4");
  ASSERT_EQ(inv->gpus.size(), 2u);

  const GpuInfo& a = inv->gpus[0];
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.uuid, "GPU-aaaa-0000");
  EXPECT_EQ(a.name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(a.pci_bus_id, "00000000:07:00.0");
  EXPECT_EQ(a.memory_total_bytes, 40 * kGiB);
  EXPECT_EQ(a.memory_used_bytes, 1 * kGiB);
  EXPECT_EQ(a.throttle_reason_names, std::vector<std::string>{"gpu_idle"});
  EXPECT_EQ(a.ecc_uncorrected_errors, 0u);
  EXPECT_EQ(a.mig_enabled, false);
  EXPECT_EQ(a.persistence_mode, true);
  ASSERT_TRUE(a.processes.has_value());
  EXPECT_TRUE(a.processes->empty());
  EXPECT_TRUE(a.error.empty());

  const GpuInfo& h = inv->gpus[1];
  EXPECT_EQ(h.utilization_gpu_pct, 97);
  EXPECT_EQ(h.utilization_mem_pct, 55);
  EXPECT_EQ(h.temperature_c, 91);
  EXPECT_EQ(h.sm_clock_mhz, 1095);
  EXPECT_EQ(h.sm_clock_max_mhz, 1980);
  EXPECT_EQ(h.throttle_reasons, 0x28u);
  EXPECT_EQ(h.throttle_reason_names, (std::vector<std::string>{"hw_slowdown", "sw_thermal"}));
  EXPECT_EQ(h.ecc_enabled, true);
  EXPECT_EQ(h.ecc_uncorrected_errors, 3u);
  EXPECT_EQ(h.mig_enabled, true);
  EXPECT_EQ(h.persistence_mode, false);
  ASSERT_TRUE(h.power_w.has_value());
  EXPECT_DOUBLE_EQ(*h.power_w, 699.5);
  EXPECT_DOUBLE_EQ(h.power_limit_w.value_or(0), 700.0);
  ASSERT_TRUE(h.processes.has_value());
  ASSERT_EQ(h.processes->size(), 2u);
  EXPECT_EQ((*h.processes)[0].pid, 4242);
  EXPECT_EQ((*h.processes)[0].used_memory_bytes, 60 * kGiB);
  EXPECT_EQ((*h.processes)[1].pid, 4343);
  EXPECT_FALSE((*h.processes)[1].used_memory_bytes.has_value());
}

TEST_F(NvmlSourceTest, InitAndShutdownArePaired) {
  {
    auto source = NvmlSource::Create(FakeApi());
    ASSERT_TRUE(source.ok());
    ASSERT_TRUE((*source)->Sample().ok());
    ASSERT_TRUE((*source)->Sample().ok());
    EXPECT_EQ(g_fake.inits, 1);
    EXPECT_EQ(g_fake.shutdowns, 0);
  }
  EXPECT_EQ(g_fake.shutdowns, 1);
}

TEST_F(NvmlSourceTest, SampleIsLive) {
  auto source = NvmlSource::Create(FakeApi());
  ASSERT_TRUE(source.ok());
  g_fake.gpus[0].util.gpu = 12;
  EXPECT_EQ((*source)->Sample()->gpus[0].utilization_gpu_pct, 12);
  g_fake.gpus[0].util.gpu = 88;
  EXPECT_EQ((*source)->Sample()->gpus[0].utilization_gpu_pct, 88);
}

TEST_F(NvmlSourceTest, FailingInitIsUnavailableWithNvmlText) {
  g_fake.init_rc = NVML_ERROR_DRIVER_NOT_LOADED;
  auto source = NvmlSource::Create(FakeApi());
  ASSERT_FALSE(source.ok());
  EXPECT_TRUE(source.status().IsUnavailable());
  EXPECT_NE(source.status().message().find("Driver Not Loaded"), std::string::npos)
      << source.status().message();
  EXPECT_EQ(g_fake.shutdowns, 0);
}

TEST_F(NvmlSourceTest, TableWithoutRequiredEntryIsInvalid) {
  NvmlApi api = FakeApi();
  api.device_get_count_v2 = nullptr;
  auto source = NvmlSource::Create(api);
  ASSERT_FALSE(source.ok());
  EXPECT_TRUE(source.status().IsInvalidArgument());
  EXPECT_EQ(g_fake.inits, 0);
}

TEST_F(NvmlSourceTest, MissingOptionalFunctionsLeaveFieldsUnknown) {
  NvmlApi api = FakeApi();
  api.device_get_temperature = nullptr;
  api.device_get_compute_running_processes_v3 = nullptr;
  api.device_get_current_clocks_throttle_reasons = nullptr;
  api.system_get_cuda_driver_version_v2 = nullptr;
  api.error_string = nullptr;
  auto source = NvmlSource::Create(api);
  ASSERT_TRUE(source.ok());
  auto inv = (*source)->Sample();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->cuda_driver_version, "");
  const GpuInfo& h = inv->gpus[1];
  EXPECT_FALSE(h.temperature_c.has_value());
  EXPECT_FALSE(h.processes.has_value());
  EXPECT_FALSE(h.throttle_reasons.has_value());
  EXPECT_TRUE(h.throttle_reason_names.empty());
  EXPECT_EQ(h.memory_total_bytes, 80 * kGiB);  // the rest is still there
  Json j = ToJson(*inv);
  EXPECT_TRUE(j["gpus"][1]["temperature_c"].is_null());
  EXPECT_TRUE(j["gpus"][1]["processes"].is_null());
  EXPECT_TRUE(j["gpus"][1]["throttle_reasons"].is_null());
  EXPECT_EQ(j["gpus"][1]["temperature_c"], nullptr);
}

TEST_F(NvmlSourceTest, LostGpuIsListedWithError) {
  g_fake.gpus[1].handle_rc = NVML_ERROR_GPU_IS_LOST;
  auto source = NvmlSource::Create(FakeApi());
  ASSERT_TRUE(source.ok());
  auto inv = (*source)->Sample();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_TRUE(inv->gpus[0].error.empty());
  EXPECT_EQ(inv->gpus[1].index, 1);
  EXPECT_NE(inv->gpus[1].error.find("GPU is lost"), std::string::npos);
  EXPECT_TRUE(inv->gpus[1].uuid.empty());
}

TEST_F(NvmlSourceTest, ManyProcessesGrowTheBuffer) {
  for (unsigned int pid = 100; pid < 140; ++pid) {
    g_fake.gpus[0].processes.push_back({pid, kGiB, 0xFFFFFFFF, 0xFFFFFFFF});
  }
  auto source = NvmlSource::Create(FakeApi());
  ASSERT_TRUE(source.ok());
  auto inv = (*source)->Sample();
  ASSERT_TRUE(inv->gpus[0].processes.has_value());
  EXPECT_EQ(inv->gpus[0].processes->size(), 40u);
  EXPECT_EQ(inv->gpus[0].processes->back().pid, 139);
}

// ---- ABI layout: our declarations must match NVIDIA's struct sizes ----------

TEST(NvmlAbi, StructLayouts) {
  EXPECT_EQ(sizeof(nvmlMemory_t), 24u);
  EXPECT_EQ(sizeof(nvmlUtilization_t), 8u);
  EXPECT_EQ(sizeof(nvmlPciInfo_t), 16u + 5 * 4u + 32u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, busId), 36u);
  EXPECT_EQ(sizeof(nvmlProcessInfo_t), 24u);
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, usedGpuMemory), 8u);
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, gpuInstanceId), 16u);
}

TEST(LoadNvml, MissingLibraryIsNotFoundWithDlerror) {
  auto api = LoadNvml("libnvidia-ml-does-not-exist.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_TRUE(api.status().IsNotFound());
  EXPECT_NE(api.status().message().find("libnvidia-ml-does-not-exist.so.1"), std::string::npos);
  EXPECT_NE(api.status().message().find("cannot open shared object file"), std::string::npos)
      << api.status().message();
}

TEST(LoadNvml, LibraryWithoutNvmlSymbolsIsFailedPrecondition) {
  auto api = LoadNvml("libm.so.6");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(api.status().message().find("nvmlInit_v2"), std::string::npos);
}

TEST(ThrottleReasonNames, BitsInOrder) {
  EXPECT_TRUE(ThrottleReasonNames(0).empty());
  EXPECT_EQ(ThrottleReasonNames(nvmlClocksThrottleReasonSwPowerCap),
            std::vector<std::string>{"sw_power_cap"});
  EXPECT_EQ(ThrottleReasonNames(0x40 | 0x80 | (1ULL << 20)),
            (std::vector<std::string>{"hw_thermal", "hw_power_brake", "bit20"}));
}

// ---- Simulated GPUs -----------------------------------------------------------

TEST(ParseSimSpec, GoodForms) {
  auto s = ParseSimSpec("sim:4x24GB");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->groups.size(), 1u);
  EXPECT_EQ(s->groups[0].count, 4);
  EXPECT_EQ(s->groups[0].memory_bytes, 24'000'000'000ULL);
  EXPECT_EQ(s->groups[0].model, "");
  EXPECT_EQ(s->load_path, "");
  s = ParseSimSpec("sim:2x80GiB");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->groups[0].count, 2);
  EXPECT_EQ(s->groups[0].memory_bytes, 80ULL << 30);
  s = ParseSimSpec("sim:4");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->groups[0].count, 4);
  EXPECT_EQ(s->groups[0].memory_bytes, 24'000'000'000ULL);
  s = ParseSimSpec("sim:64x512Mi");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->groups[0].memory_bytes, 512ULL << 20);
}

TEST(ParseSimSpec, ModelsGroupsAndLoadFile) {
  auto s = ParseSimSpec("sim:2x80GB:A100,1:RTX 4090,3x16GB@/tmp/a@b,c.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->groups.size(), 3u);
  EXPECT_EQ(s->groups[0].count, 2);
  EXPECT_EQ(s->groups[0].memory_bytes, 80'000'000'000ULL);
  EXPECT_EQ(s->groups[0].model, "A100");
  EXPECT_EQ(s->groups[1].count, 1);
  EXPECT_EQ(s->groups[1].memory_bytes, kDefaultSimulatedMemoryBytes);
  EXPECT_EQ(s->groups[1].model, "RTX 4090");
  EXPECT_EQ(s->groups[2].count, 3);
  EXPECT_EQ(s->groups[2].model, "");
  EXPECT_EQ(s->TotalCount(), 6);
  EXPECT_EQ(s->load_path, "/tmp/a@b,c.json");  // the path is everything after the first '@'
  EXPECT_TRUE(ParseSimSpec("sim:32,32").ok());
}

TEST(ParseSimSpec, BadFormsNameTheValueAndTheForms) {
  for (const char* bad : {"sim:",
                          "sim:0",
                          "sim:65",
                          "sim:-1",
                          "sim:x24GB",
                          "sim:4x",
                          "sim:4x0GB",
                          "sim:4x24XB",
                          "sim:4y24GB",
                          "sim:four",
                          "sim:4x24GBx2",
                          "sim4",
                          "sim: 4",
                          "sim:33,32",
                          "sim:2,",
                          "sim:,2",
                          "sim:2x80GB:",
                          "sim:2x80GB:A100/x",
                          "sim:2: A100",
                          "sim:2x80GB:A100:B",
                          "sim:2@",
                          "sim:2@rel/load.json",
                          "sim:2x80GB:A100,0:L4"}) {
    auto s = ParseSimSpec(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_TRUE(s.status().IsInvalidArgument()) << bad;
    EXPECT_NE(s.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << s.status().message();
    EXPECT_NE(s.status().message().find("sim:NxSIZE"), std::string::npos);
    EXPECT_EQ(s.status().msg_id(), "gpu.sim_spec");
  }
  // The message says which part is wrong.
  EXPECT_NE(ParseSimSpec("sim:2x80GB:A100/x").status().message().find("MODEL"), std::string::npos);
  EXPECT_NE(ParseSimSpec("sim:2x8XB").status().message().find("SIZE"), std::string::npos);
  EXPECT_NE(ParseSimSpec("sim:2@rel").status().message().find("@FILE"), std::string::npos);
}

TEST(SimulatedSource, Sample) {
  auto source = SimulatedSource::Create("sim:4x24GB");
  ASSERT_TRUE(source.ok());
  auto inv = (*source)->Sample();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->source, "simulated");
  EXPECT_TRUE(inv->simulated);
  ASSERT_EQ(inv->gpus.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const GpuInfo& g = inv->gpus[i];
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.name, "Simulated GPU");
    EXPECT_EQ(g.uuid, "GPU-sim-000" + std::to_string(i));
    EXPECT_EQ(g.memory_total_bytes, 24'000'000'000ULL);
    EXPECT_EQ(g.memory_used_bytes, 0u);
    EXPECT_EQ(g.utilization_gpu_pct, 0);
    EXPECT_TRUE(g.throttle_reason_names.empty());
  }
}

TEST(SimulatedSource, ModelsNameTheGpusAndStaySimulated) {
  auto source = SimulatedSource::Create("sim:2x80GB:A100,2x24GB:L4,1:AMD MI300X,1:nvidia H100");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto inv = (*source)->Sample();
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->simulated);
  EXPECT_EQ(inv->source, "simulated");
  ASSERT_EQ(inv->gpus.size(), 6u);
  std::vector<std::string> names;
  for (const GpuInfo& g : inv->gpus) names.push_back(g.name);
  EXPECT_EQ(names, (std::vector<std::string>{"NVIDIA A100 (simulated)", "NVIDIA A100 (simulated)",
                                             "NVIDIA L4 (simulated)", "NVIDIA L4 (simulated)",
                                             "AMD MI300X (simulated)", "nvidia H100 (simulated)"}));
  EXPECT_EQ(inv->gpus[1].memory_total_bytes, 80'000'000'000ULL);
  EXPECT_EQ(inv->gpus[2].memory_total_bytes, 24'000'000'000ULL);
  EXPECT_EQ(inv->gpus[3].index, 3);
  EXPECT_EQ(inv->gpus[3].uuid, "GPU-sim-0003");
  EXPECT_NE(inv->note.find("6 simulated GPUs: 2 × A100 80GB, 2 × L4 24GB"), std::string::npos)
      << inv->note;
}

// A temp directory with a load file, written in place (same inode) as a
// careless test would, so that a change within one timestamp tick is seen.
class SimLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-simload-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/load.json";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  std::unique_ptr<SimulatedSource> Open(const std::string& groups) {
    auto s = SimulatedSource::Create("sim:" + groups + "@" + path_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  Inventory Sample(SimulatedSource& s) {
    auto inv = s.Sample();
    EXPECT_TRUE(inv.ok()) << inv.status().ToString();
    return inv.ok() ? *inv : Inventory{};
  }
  std::string dir_, path_;
};

TEST_F(SimLoadTest, MissingFileIsIdle) {
  auto s = Open("2x80GB:A100");
  Inventory inv = Sample(*s);
  ASSERT_EQ(inv.gpus.size(), 2u);
  EXPECT_EQ(inv.gpus[0].utilization_gpu_pct, 0);
  EXPECT_EQ(inv.gpus[0].memory_used_bytes, 0u);
  EXPECT_NE(inv.note.find("no load file at " + path_), std::string::npos) << inv.note;
}

TEST_F(SimLoadTest, LoadIsApplied) {
  Write(R"J({"gpus": [
    {"index": 1, "utilization_gpu_pct": 87, "utilization_mem_pct": 41,
     "memory_used_bytes": "20GB", "temperature_c": 83, "sm_clock_mhz": 1200,
     "sm_clock_max_mhz": 1980, "power_w": 301.5, "power_limit_w": 400,
     "throttle_reason_names": ["sw_thermal", "hw_slowdown"], "ecc_uncorrected_errors": 2,
     "processes": [{"pid": 1234, "used_memory_bytes": "10GB"},
                   {"pid": 99, "used_memory_bytes": 5}]},
    {"index": 2, "processes": [{"pid": 7, "used_memory_bytes": "3GB"},
                               {"pid": 8, "used_memory_bytes": "1GB"}]},
    {"index": 3, "error": "GPU is lost (15)"}]})J");
  auto s = Open("2x80GB:A100,2x24GB:L4");
  Inventory inv = Sample(*s);
  ASSERT_EQ(inv.gpus.size(), 4u);
  EXPECT_TRUE(inv.simulated);
  EXPECT_NE(inv.note.find("load from " + path_), std::string::npos) << inv.note;
  const GpuInfo& idle = inv.gpus[0];
  EXPECT_EQ(idle.utilization_gpu_pct, 0);
  EXPECT_EQ(idle.memory_used_bytes, 0u);
  EXPECT_FALSE(idle.temperature_c.has_value());

  const GpuInfo& busy = inv.gpus[1];
  EXPECT_EQ(busy.name, "NVIDIA A100 (simulated)");
  EXPECT_EQ(busy.utilization_gpu_pct, 87);
  EXPECT_EQ(busy.utilization_mem_pct, 41);
  EXPECT_EQ(busy.memory_used_bytes, 20'000'000'000ULL);
  EXPECT_EQ(busy.temperature_c, 83);
  EXPECT_EQ(busy.sm_clock_mhz, 1200);
  EXPECT_EQ(busy.sm_clock_max_mhz, 1980);
  EXPECT_DOUBLE_EQ(busy.power_w.value_or(0), 301.5);
  EXPECT_DOUBLE_EQ(busy.power_limit_w.value_or(0), 400);
  EXPECT_EQ(busy.throttle_reasons, 0x28u);
  EXPECT_EQ(busy.throttle_reason_names, (std::vector<std::string>{"hw_slowdown", "sw_thermal"}));
  EXPECT_EQ(busy.ecc_uncorrected_errors, 2u);
  ASSERT_TRUE(busy.processes.has_value());
  ASSERT_EQ(busy.processes->size(), 2u);
  EXPECT_EQ((*busy.processes)[0].pid, 1234);
  EXPECT_EQ((*busy.processes)[0].used_memory_bytes, 10'000'000'000ULL);
  EXPECT_EQ((*busy.processes)[1].pid, 99);
  EXPECT_EQ((*busy.processes)[1].used_memory_bytes, 5u);

  // Without memory_used_bytes, the memory in use is what the processes hold.
  EXPECT_EQ(inv.gpus[2].memory_used_bytes, 4'000'000'000ULL);
  EXPECT_EQ(inv.gpus[2].utilization_gpu_pct, 0);
  EXPECT_EQ(inv.gpus[3].error, "GPU is lost (15)");

  Json j = ToJson(inv);
  EXPECT_EQ(j["gpus"][1]["throttle_reason_names"], Json({"hw_slowdown", "sw_thermal"}));
  EXPECT_EQ(j["gpus"][1]["processes"][0]["pid"], 1234);
}

TEST_F(SimLoadTest, ChangesArePickedUp) {
  auto s = Open("2");
  Write(R"({"gpus": [{"index": 0, "utilization_gpu_pct": 87}]})");
  EXPECT_EQ(Sample(*s).gpus[0].utilization_gpu_pct, 87);
  // Same size, same inode, most likely the same timestamp tick.
  Write(R"({"gpus": [{"index": 0, "utilization_gpu_pct": 12}]})");
  EXPECT_EQ(Sample(*s).gpus[0].utilization_gpu_pct, 12);
  Write(R"({"gpus": [{"index": 1, "throttle_reason_names": ["hw_power_brake"]}]})");
  Inventory inv = Sample(*s);
  EXPECT_EQ(inv.gpus[0].utilization_gpu_pct, 0);  // not listed any more: idle
  EXPECT_EQ(inv.gpus[1].throttle_reason_names, std::vector<std::string>{"hw_power_brake"});
  std::filesystem::remove(path_);
  inv = Sample(*s);
  EXPECT_TRUE(inv.gpus[1].throttle_reason_names.empty());
  EXPECT_NE(inv.note.find("no load file"), std::string::npos) << inv.note;
}

TEST_F(SimLoadTest, BadFileIsReportedAndKeepsTheLastGoodLoad) {
  auto s = Open("2x24GB");
  Write(R"({"gpus": [{"index": 0, "utilization_gpu_pct": 55}]})");
  EXPECT_EQ(Sample(*s).gpus[0].utilization_gpu_pct, 55);

  Write(R"({"gpus": [{"index": 0, "utilization_gpu_pct": 5)");  // cut short
  Inventory inv = Sample(*s);
  EXPECT_EQ(inv.gpus[0].utilization_gpu_pct, 55);
  EXPECT_NE(inv.note.find(path_ + " is not valid JSON"), std::string::npos) << inv.note;

  Write(R"({"gpus": [{"index": 0, "utilization_gpu_pct": 140}]})");
  inv = Sample(*s);
  EXPECT_EQ(inv.gpus[0].utilization_gpu_pct, 55);
  EXPECT_NE(inv.note.find("field 'gpus[0].utilization_gpu_pct' is not valid; allowed: 0…100"),
            std::string::npos)
      << inv.note;

  Write(R"({"gpus": [{"index": 1, "utilization_gpu_pct": 9}]})");
  inv = Sample(*s);
  EXPECT_EQ(inv.gpus[0].utilization_gpu_pct, 0);
  EXPECT_EQ(inv.gpus[1].utilization_gpu_pct, 9);
  EXPECT_EQ(inv.note.find("not valid"), std::string::npos) << inv.note;
}

TEST(ApplySimLoad, ErrorsNameTheField) {
  struct Case {
    const char* text;
    const char* field;
  };
  for (const Case& c : std::vector<Case>{
           {R"([])", "(top level)"},
           {R"({"gpu": []})", "gpu"},
           {R"({})", "gpus"},
           {R"({"gpus": {}})", "gpus"},
           {R"({"gpus": [3]})", "gpus[0]"},
           {R"({"gpus": [{"utilization_gpu_pct": 1}]})", "gpus[0].index"},
           {R"({"gpus": [{"index": 2}]})", "gpus[0].index"},
           {R"({"gpus": [{"index": 0}, {"index": 0}]})", "gpus[1].index"},
           {R"({"gpus": [{"index": 0, "utilisation": 5}]})", "gpus[0].utilisation"},
           {R"({"gpus": [{"index": 0, "utilization_gpu_pct": "87"}]})",
            "gpus[0].utilization_gpu_pct"},
           {R"({"gpus": [{"index": 0, "memory_used_bytes": "25GB"}]})",
            "gpus[0].memory_used_bytes"},
           {R"({"gpus": [{"index": 0, "memory_used_bytes": -1}]})", "gpus[0].memory_used_bytes"},
           {R"({"gpus": [{"index": 0, "memory_used_bytes": "lots"}]})",
            "gpus[0].memory_used_bytes"},
           {R"({"gpus": [{"index": 1, "temperature_c": 900}]})", "gpus[0].temperature_c"},
           {R"({"gpus": [{"index": 0, "power_w": "hot"}]})", "gpus[0].power_w"},
           {R"({"gpus": [{"index": 0, "throttle_reason_names": "sw_thermal"}]})",
            "gpus[0].throttle_reason_names"},
           {R"({"gpus": [{"index": 0, "throttle_reason_names": ["hot"]}]})",
            "gpus[0].throttle_reason_names[0]"},
           {R"({"gpus": [{"index": 0, "error": 5}]})", "gpus[0].error"},
           {R"({"gpus": [{"index": 0, "processes": {}}]})", "gpus[0].processes"},
           {R"({"gpus": [{"index": 0, "processes": [{"used_memory_bytes": 1}]}]})",
            "gpus[0].processes[0].pid"},
           {R"({"gpus": [{"index": 0, "processes": [{"pid": -4}]}]})", "gpus[0].processes[0].pid"},
           {R"({"gpus": [{"index": 0, "processes": [{"pid": 4, "mem": 1}]}]})",
            "gpus[0].processes[0].mem"},
           {R"({"gpus": [{"index": 0, "processes": [{"pid": 4, "used_memory_bytes": "20GB"},
                                                     {"pid": 5, "used_memory_bytes": "20GB"}]}]})",
            "gpus[0].processes"},
       }) {
    auto source = SimulatedSource(SimSpec{{{2, 24'000'000'000ULL, ""}}, ""});
    std::vector<GpuInfo> gpus = source.Sample()->gpus;
    std::vector<GpuInfo> before = gpus;
    Status st = ApplySimLoad(c.text, "/x/load.json", gpus);
    ASSERT_FALSE(st.ok()) << c.text;
    EXPECT_TRUE(st.IsInvalidArgument());
    EXPECT_EQ(st.msg_id(), "gpu.sim_load_field") << c.text;
    EXPECT_NE(st.message().find(std::string("field '") + c.field + "'"), std::string::npos)
        << c.text << " -> " << st.message();
    EXPECT_NE(st.message().find("/x/load.json"), std::string::npos);
    for (size_t i = 0; i < gpus.size(); ++i) {
      EXPECT_EQ(ToJson(gpus[i]), ToJson(before[i])) << c.text;  // unchanged on error
    }
  }
  std::vector<GpuInfo> gpus(1);
  Status st = ApplySimLoad("{", "/x/load.json", gpus);
  EXPECT_EQ(st.msg_id(), "gpu.sim_load_json");
  // Unknown throttle bits are accepted by the names ThrottleReasonNames gives them.
  gpus = SimulatedSource(SimSpec{{{1, 1000, ""}}, ""}).Sample()->gpus;
  ASSERT_TRUE(
      ApplySimLoad(R"({"gpus": [{"index": 0, "throttle_reason_names": ["bit20"]}]})", "/x", gpus)
          .ok());
  EXPECT_EQ(gpus[0].throttle_reasons, 1ULL << 20);
}

// ---- JSON ---------------------------------------------------------------------

TEST(InventoryJson, Fields) {
  ResetFake();
  auto source = NvmlSource::Create(FakeApi());
  ASSERT_TRUE(source.ok());
  Json j = ToJson(*(*source)->Sample());
  EXPECT_EQ(j["source"], "nvml");
  EXPECT_EQ(j["simulated"], false);
  EXPECT_EQ(j["driver_version"], "550.54.15");
  EXPECT_EQ(j["cuda_driver_version"], "12.4");
  EXPECT_EQ(j["note"], "");
  ASSERT_EQ(j["gpus"].size(), 2u);
  const Json& h = j["gpus"][1];
  for (const char* key : {"index",
                          "uuid",
                          "name",
                          "pci_bus_id",
                          "memory_total_bytes",
                          "memory_used_bytes",
                          "utilization_gpu_pct",
                          "utilization_mem_pct",
                          "temperature_c",
                          "sm_clock_mhz",
                          "sm_clock_max_mhz",
                          "throttle_reasons",
                          "throttle_reason_names",
                          "ecc_enabled",
                          "ecc_uncorrected_errors",
                          "mig_enabled",
                          "persistence_mode",
                          "power_w",
                          "power_limit_w",
                          "processes",
                          "error"}) {
    EXPECT_TRUE(h.contains(key)) << key;
  }
  EXPECT_EQ(h["uuid"], "GPU-bbbb-1111");
  EXPECT_EQ(h["memory_total_bytes"], 80 * kGiB);
  EXPECT_EQ(h["throttle_reasons"], 0x28);
  EXPECT_EQ(h["throttle_reason_names"], Json({"hw_slowdown", "sw_thermal"}));
  EXPECT_EQ(h["ecc_uncorrected_errors"], 3);
  EXPECT_EQ(h["mig_enabled"], true);
  EXPECT_DOUBLE_EQ(h["power_w"].get<double>(), 699.5);
  EXPECT_EQ(h["processes"][0]["pid"], 4242);
  EXPECT_EQ(h["processes"][0]["used_memory_bytes"], 60 * kGiB);
  EXPECT_TRUE(h["processes"][1]["used_memory_bytes"].is_null());

  Json sim = ToJson(*SimulatedSource(SimSpec{{{1, 1000, ""}}, ""}).Sample());
  EXPECT_EQ(sim["source"], "simulated");
  EXPECT_EQ(sim["simulated"], true);
  EXPECT_TRUE(sim["gpus"][0]["temperature_c"].is_null());
}

// ---- OpenGpuSource --------------------------------------------------------------

TEST(OpenGpuSource, AutoWithoutDriverIsZeroGpusWithANote) {
  if (LoadNvml().ok()) GTEST_SKIP() << "this machine has an NVIDIA driver";
  for (const char* spec : {"", "auto"}) {
    auto source = OpenGpuSource(spec);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    auto inv = (*source)->Sample();
    ASSERT_TRUE(inv.ok());
    EXPECT_EQ(inv->source, "none");
    EXPECT_TRUE(inv->gpus.empty());
    EXPECT_NE(inv->note.find("libnvidia-ml.so.1"), std::string::npos) << inv->note;
  }
  auto nvml = OpenGpuSource("nvml");
  ASSERT_FALSE(nvml.ok());
  EXPECT_TRUE(nvml.status().IsNotFound());
}

TEST(OpenGpuSource, NoneSimAndBad) {
  auto none = OpenGpuSource("none");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->Sample()->source, "none");
  EXPECT_TRUE((*none)->Sample()->gpus.empty());

  auto sim = OpenGpuSource("sim:2x80GiB");
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ((*sim)->Sample()->gpus.size(), 2u);

  auto bad_sim = OpenGpuSource("sim:0");
  ASSERT_FALSE(bad_sim.ok());
  EXPECT_TRUE(bad_sim.status().IsInvalidArgument());

  auto bad = OpenGpuSource("cuda");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_NE(bad.status().message().find("'cuda'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("auto, nvml, none, sim:N"), std::string::npos);
}

}  // namespace
}  // namespace lathe::gpu
