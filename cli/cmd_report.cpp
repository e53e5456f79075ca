// `nightlora report RUN_DIR [--out FILE.html] [--x time|steps]`: one self-contained HTML page about a training
// run (the --out folder of `nightlora train`), viewable offline in any browser. It can be run
// while the job is still training: the page shows the steps logged so far.
#include <cstdio>
#include <memory>
#include <string>

#include "command.h"
#include "nightlora/report/html_report.h"

namespace {

struct ReportArgs {
  std::string run_dir;
  std::string out;
  std::string x = "time";
};

nlcli::Register reg_report(
    "report", "Write an HTML report (charts and summary) of a training run folder",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<ReportArgs>();
      sub.add_option("run_dir", a->run_dir, "the --out folder of a `nightlora train` run")->required();
      sub.add_option("-o,--out", a->out, "HTML file to write (default: RUN_DIR/report.html)");
      sub.add_option("--x", a->x, "the charts' x axis: time (wall time, the default) or steps")
          ->check(CLI::IsMember({"time", "steps"}));
      return [a]() {
        nl::ReportOptions opt;
        opt.x = a->x == "steps" ? nl::XAxis::Steps : nl::XAxis::Time;
        const std::string path = nl::write_run_report(a->run_dir, a->out, opt);
        std::printf("report: %s\n", path.c_str());
        return 0;
      };
    });

}  // namespace
