// `oomguard compare`: peaks of several results files side by side against a reference.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli/cli.h"
#include "cli/compare_command.h"
#include "compare/compared_run.h"
#include "compare/comparison.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

// A results file as `oomguard run --json` writes it, reduced to what compare reads.
std::string Results(const std::string& backend, int64_t a, int64_t b, bool b_measured = true) {
  std::string text = R"({"schema_version": 1, "backend": ")" + backend + R"(", "scenarios": [
    {"name": "s", "variants": [
      {"name": "a", "measurement": {"peak_bytes": )" +
                     std::to_string(a) + R"(}},
      {"name": "b")";
  if (b_measured) text += R"(, "measurement": {"peak_bytes": )" + std::to_string(b) + "}";
  return text + "}]}]}";
}

class CompareTest : public ::testing::Test {
 protected:
  int Run(CompareOptions options) {
    out_.str("");
    err_.str("");
    return CompareCommand(options, out_, err_);
  }
  testing::ScratchFolder folder_{"compare"};
  std::ostringstream out_, err_;
};

TEST_F(CompareTest, EqualPeaksAgreeToTheByteAgainstTheLastFile) {
  const std::string cpu = folder_.Write("cpu.json", Results("cpu", 1048576, 2048));
  const std::string meta = folder_.Write("meta.json", Results("meta", 1048576, 2048));
  EXPECT_EQ(Run({{cpu, meta}}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(),
            "  scenario  variant  cpu                 meta (reference)\n"
            "  s         a        1024.00 KiB (same)  1024.00 KiB\n"
            "  s         b        2.00 KiB (same)     2.00 KiB\n"
            "\n"
            "2 variants against meta: 2 equal to the byte, 0 within 2.0%, 0 past it (marked !)\n");
}

TEST_F(CompareTest, DifferencesShowInBytesAndPercentAndPastTheToleranceFail) {
  const std::string cpu = folder_.Write("cpu.json", Results("cpu", 1000000, 1000));
  const std::string cuda = folder_.Write("cuda.json", Results("cuda", 1010000, 1100));
  // a: cpu is 10000 bytes (1.0%) under cuda, within 2%; b: 100 bytes (9.1%) under, past it.
  EXPECT_EQ(Run({{cpu, cuda}}), kExitFailures);
  EXPECT_NE(out_.str().find("\n   s         a        976.56 KiB (-9.77 KiB, -1.0%)   986.33 KiB\n"), std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("\n!  s         b        1000 bytes (-100 bytes, -9.1%)  1.07 KiB\n"), std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("2 variants against cuda: 0 equal to the byte, 1 within 2.0%, 1 past it"),
            std::string::npos);
  CompareOptions looser{{cpu, cuda}};
  looser.tolerance_percent = 10;
  EXPECT_EQ(Run(looser), kExitOk);
}

TEST_F(CompareTest, TheReferenceIsABackendOrAPositionAndMissingDataIsADash) {
  const std::string cpu = folder_.Write("cpu.json", Results("cpu", 100, 200));
  const std::string meta = folder_.Write("meta.json", Results("meta", 100, 0, /*b_measured=*/false));
  CompareOptions options{{cpu, meta}};
  options.reference = "cpu";
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_NE(out_.str().find("cpu (reference)  meta"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("\n  s         b        200 bytes        -\n"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("1 equal to the byte, 0 within 2.0%, 0 past it (marked !), 1 not compared"),
            std::string::npos)
      << out_.str();
  options.reference = "2";
  EXPECT_EQ(Run(options), kExitOk);
  EXPECT_NE(out_.str().find("meta (reference)"), std::string::npos);
  options.reference = "cuda";
  EXPECT_EQ(Run(options), kExitUsage);
  EXPECT_EQ(err_.str(),
            "oomguard compare: --reference cuda is neither the backend of a file nor a position from 1 to 2\n");
}

TEST_F(CompareTest, ACudaRunAddsItsAllocatorPeaksAndIsComparedByItsAllocatedPeak) {
  const std::string cpu = folder_.Write("cpu.json", Results("cpu", 1000, 2000));
  const std::string cuda = folder_.Write("cuda.json", R"({"backend": "cuda", "scenarios": [{"name": "s", "variants": [
      {"name": "a", "measurement": {"peak_bytes": 1000, "cuda": {"allocated_peak_bytes": 1024, "reserved_peak_bytes": 2097152}}},
      {"name": "b", "measurement": {"peak_bytes": 2000, "cuda": {"allocated_peak_bytes": 2048, "reserved_peak_bytes": 2097152}}}]}]})");  // written before requested peaks were read: no itemising
  EXPECT_EQ(Run({{cpu, cuda}}), kExitFailures);  // 1000 vs 1024 bytes: -2.3%, past 2%
  EXPECT_EQ(
      out_.str(),
      "   scenario  variant  cpu                            cuda                           "
      "cuda allocated (reference)  cuda reserved\n"
      "!  s         a        1000 bytes (-24 bytes, -2.3%)  1000 bytes (-24 bytes, -2.3%)  1024 bytes                  "
      "2.00 MiB\n"
      "!  s         b        1.95 KiB (-48 bytes, -2.3%)    1.95 KiB (-48 bytes, -2.3%)    2.00 KiB                    "
      "2.00 MiB\n"
      "\n"
      "2 variants against cuda allocated: 0 equal to the byte, 0 within 2.0%, 2 past it (marked !)\n");
}

TEST_F(CompareTest, CudaPeaksAreNetOfTheWorkspacesAndDifferencesAreItemised) {
  // a: cpu 1000 B; cuda asked for 1000 B (+ a 32 MiB workspace held from the start), blocks of 1024 B.
  // b: cpu 1000000 B; the cuda kernels asked for 1040000 B, rounded to 1040384 B.
  const std::string cpu = folder_.Write("cpu.json", Results("cpu", 1000, 1000000));
  const std::string cuda = folder_.Write("cuda.json", R"({"backend": "cuda", "scenarios": [{"name": "s", "variants": [
      {"name": "a", "measurement": {"peak_bytes": 1000, "cuda": {"allocated_peak_bytes": 33555456,
        "reserved_peak_bytes": 35651584, "requested_peak_bytes": 33555432, "allocated_at_start_bytes": 33554432,
        "reserved_at_start_bytes": 33554432}}},
      {"name": "b", "measurement": {"peak_bytes": 1040000, "cuda": {"allocated_peak_bytes": 34594816,
        "reserved_peak_bytes": 35651584, "requested_peak_bytes": 34594432, "allocated_at_start_bytes": 33554432,
        "reserved_at_start_bytes": 33554432}}}]}]})");
  EXPECT_EQ(Run({{cpu, cuda}}), kExitFailures);
  EXPECT_EQ(out_.str(),
            "   scenario  variant  cpu                             cuda                            "
            "cuda allocated (reference)  cuda reserved\n"
            "!  s         a        1000 bytes (-24 bytes, -2.3%)   1000 bytes (-24 bytes, -2.3%)   1024 bytes          "
            "        "
            "2.00 MiB\n"
            "!  s         b        976.56 KiB (-39.44 KiB, -3.9%)  1015.62 KiB (-384 bytes, 0.0%)  1016.00 KiB         "
            "        "
            "2.00 MiB\n"
            "\n"
            "2 variants against cuda allocated: 0 equal to the byte, 0 within 2.0%, 2 past it (marked !)\n"
            "cuda allocated and reserved are net of what the allocator held before each variant began (up to "
            "32.00 MiB: the CUDA libraries' workspaces).\n"
            "\nPast the tolerance, itemised:\n"
            "s / a: cuda allocated - cpu = +24 bytes: +24 bytes allocator rounding (512-byte blocks, unsplit segment "
            "tails), 0 bytes asked for by the kernels (cuBLAS/cuDNN workspaces, attention scratch)\n"
            "s / b: cuda allocated - cpu = +39.44 KiB: +384 bytes allocator rounding (512-byte blocks, unsplit "
            "segment tails), +39.06 KiB asked for by the kernels (cuBLAS/cuDNN workspaces, attention scratch)\n");
}

TEST_F(CompareTest, AModelCudaRunAddsItsPredictionsHeldToTheCudaAllocatedPeak) {
  // cpu asked for 1000 B; the model rounds it to a 1024 B block in a 2 MiB segment, as the GPU did.
  const std::string cpu = folder_.Write("cpu.json", R"({"backend": "cpu", "scenarios": [{"name": "s", "variants": [
      {"name": "a", "measurement": {"peak_bytes": 1000, "cuda_model": {"allocated_peak_bytes": 1024,
        "reserved_peak_bytes": 2097152}}}]}]})");
  const std::string cuda = folder_.Write("cuda.json", R"({"backend": "cuda", "scenarios": [{"name": "s", "variants": [
      {"name": "a", "measurement": {"peak_bytes": 1000, "cuda": {"allocated_peak_bytes": 1024,
        "reserved_peak_bytes": 2097152, "requested_peak_bytes": 1000}}}]}]})");
  EXPECT_EQ(Run({{cpu, cuda}}), kExitFailures);  // the plain cpu peak is 2.3% under
  EXPECT_EQ(out_.str(),
            "   scenario  variant  cpu                            cpu model allocated  cpu model reserved  "
            "cuda                           cuda allocated (reference)  cuda reserved\n"
            "!  s         a        1000 bytes (-24 bytes, -2.3%)  1024 bytes (same)    2.00 MiB            "
            "1000 bytes (-24 bytes, -2.3%)  1024 bytes                  2.00 MiB\n"
            "\n"
            "1 variants against cuda allocated: 0 equal to the byte, 0 within 2.0%, 1 past it (marked !)\n"
            "\nPast the tolerance, itemised:\n"
            "s / a: cuda allocated - cpu = +24 bytes: +24 bytes allocator rounding (512-byte blocks, unsplit segment "
            "tails), 0 bytes asked for by the kernels (cuBLAS/cuDNN workspaces, attention scratch)\n");
}

// Card mode (meta, --kernels cuda): the model held an H100's 32 MiB cuBLAS workspace and cuBLASLt's 1 MiB
// from the start (Note [cuBLAS workspaces held from the start]); its columns are net of them, as the
// cuda columns are of the GPU's, and the note counts them among what was held.
TEST_F(CompareTest, CardModesModelColumnsAreNetOfTheWorkspacesHeldFromTheStart) {
  const std::string meta = folder_.Write("meta.json", R"({"backend": "meta", "scenarios": [{"name": "s", "variants": [
      {"name": "a", "measurement": {"peak_bytes": 1000, "cuda_model": {"allocated_peak_bytes": 34604032,
        "reserved_peak_bytes": 35651584, "allocated_at_start_bytes": 34603008,
        "reserved_at_start_bytes": 35651584}}}]}]})");
  const std::string cuda = folder_.Write("cuda.json", R"({"backend": "cuda", "scenarios": [{"name": "s", "variants": [
      {"name": "a", "measurement": {"peak_bytes": 1000, "cuda": {"allocated_peak_bytes": 34604032,
        "reserved_peak_bytes": 35651584, "requested_peak_bytes": 34604008, "allocated_at_start_bytes": 34603008,
        "reserved_at_start_bytes": 35651584}}}]}]})");
  (void)Run({{meta, cuda}});
  EXPECT_NE(out_.str().find("meta model allocated  meta model reserved"), std::string::npos) << out_.str();
  // The reserved column is not compared (the reference is cuda allocated): 32 + 2 MiB held, nothing more.
  EXPECT_NE(out_.str().find("  1024 bytes (same)     0 bytes              1000 bytes"), std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("(up to 34.00 MiB: the CUDA libraries' workspaces)"), std::string::npos) << out_.str();
}

TEST_F(CompareTest, MarkdownHasTheSameRows) {
  const std::string cpu = folder_.Write("cpu.json", Results("cpu", 100, 200));
  const std::string meta = folder_.Write("meta.json", Results("meta", 100, 201));
  CompareOptions options{{cpu, meta}};
  options.markdown_path = folder_.path() + "/fidelity.md";
  EXPECT_EQ(Run(options), kExitOk);
  std::ifstream in(options.markdown_path);
  std::stringstream md;
  md << in.rdbuf();
  EXPECT_EQ(md.str(),
            "| | scenario | variant | cpu | meta (reference) |\n"
            "|---|---|---|---|---|\n"
            "|  | s | a | 100 bytes (same) | 100 bytes |\n"
            "|  | s | b | 200 bytes (-1 bytes, -0.5%) | 201 bytes |\n"
            "\n"
            "2 variants against meta: 1 equal to the byte, 1 within 2.0%, 0 past it (marked !)\n");
}

TEST_F(CompareTest, AFileThatIsNotResultsIsAUsageErrorNamingIt) {
  const std::string cpu = folder_.Write("cpu.json", Results("cpu", 100, 200));
  const std::string scenario = folder_.Write("scenario.json", R"({"name": "x", "variants": {}})");
  EXPECT_EQ(Run({{cpu, scenario}}), kExitUsage);
  EXPECT_EQ(err_.str(), "oomguard compare: " + scenario +
                            ": not an oomguard results file (expected the JSON `oomguard run --json FILE` writes)\n");
  EXPECT_EQ(Run({{cpu}}), kExitUsage);
  EXPECT_EQ(err_.str(), "oomguard compare: give at least two results files (oomguard run --json FILE)\n");
}

}  // namespace
}  // namespace oomguard
