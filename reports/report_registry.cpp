#include "reports/report_registry.h"

#include "base/atomic_file.h"
#include "base/did_you_mean.h"
#include "base/json_text.h"
#include "reports/csv_writer.h"
#include "reports/html/html_writer.h"
#include "reports/junit_writer.h"
#include "reports/markdown_writer.h"
#include "reports/results_json.h"

namespace oomguard {
namespace {

using Renderer = std::string (*)(const RunResults&);

std::string RenderJson(const RunResults& report) { return DumpJson(ResultsToJson(report), 2) + "\n"; }

struct Format {
  const char* name;
  Renderer render;
};
constexpr Format kFormats[] = {{"junit", &RenderJUnit},
                               {"md", &RenderMarkdown},
                               {"html", &RenderHtml},
                               {"json", &RenderJson},
                               {"csv", &RenderCsv}};

const Format* Parse(const std::string& spec, std::string* path, std::string* error) {
  const size_t eq = spec.find('=');
  const std::string name = spec.substr(0, eq);
  for (const Format& f : kFormats) {
    if (name == f.name && eq != std::string::npos && eq + 1 < spec.size()) {
      *path = spec.substr(eq + 1);
      return &f;
    }
  }
  *error = "--report: expected FORMAT=FILE with FORMAT one of " + JoinNames(ReportFormatNames(), ", ") + ", got '" +
           spec + "'";
  return nullptr;
}

}  // namespace

std::vector<std::string> ReportFormatNames() {
  std::vector<std::string> names;
  for (const Format& f : kFormats) names.emplace_back(f.name);
  return names;
}

bool ValidateReportSpec(const std::string& spec, std::string* error) {
  std::string path;
  return Parse(spec, &path, error) != nullptr;
}

bool WriteReport(const std::string& spec, const RunResults& report, std::string* error) {
  std::string path;
  const Format* format = Parse(spec, &path, error);
  return format != nullptr && WriteFileAtomically(path, format->render(report), error);
}

}  // namespace oomguard
