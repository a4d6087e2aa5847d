// cli/report.hpp and watch's sparklines, on run folders written here by hand: what the page draws
// from each record, what it says when a record is torn, missing or of another format, and the
// coded errors (E-REC-007 not a run, E-REC-008 an empty sweep). tests/e2e/report_check.py drives
// the real binary and a browser.
#include <nitro/cli/commands.hpp>
#include <nitro/cli/report.hpp>
#include <nitro/record/loggers/jsonl.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include "../support/nitro_test.hpp"

namespace {

namespace fs = std::filesystem;

void write(fs::path const& p, std::string const& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::size_t count(std::string const& text, std::string const& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// A run with train loss and eta, valid acc/loss and a 3x3 confusion matrix; `tail` ends metrics.jsonl.
fs::path make_run(std::string const& name, std::string const& tail, std::string const& format = "nitro.metrics.v1") {
  const fs::path dir = nitro_test::tmp_dir("report/" + name);
  write(dir / "manifest.json",
        R"({"experiment":"Toy","program":{"name":"Toy<4>"},"seed":3,"data":{"name":"toy","classes":["cat","dog","owl"]},)"
        R"("selection":{"variant":null,"sets":[["lr","0.1"]]},"knobs":{"lr":{"value":0.1,"source":"set","doc":"the rate"}},)"
        R"j("run_keywords":{"schedules":{"value":"eta","source":"accessor"},"monitor":{"value":"valid.acc (max)","source":"keyword"}}})j");
  write(dir / "status.json", R"({"state":"finished","step":20,"epoch":2,"horizon":{"steps":20,"epochs":2},"last":{"valid/acc":0.75}})");
  write(dir / "binding_report.txt", "Nitro Toy<4>\n  a < b & c\n");
  std::string m = R"({"type":"metadata","format":")" + format + R"(","batch_size":8,"wall_time":100.0})" "\n";
  m += R"({"type":"metrics","split":"train","step":10,"epoch":1,"wall_time":101.0,"loss":2.0,"eta":0.1})" "\n";
  m += R"({"type":"metrics","split":"valid","step":10,"epoch":1,"wall_time":101.5,"acc":0.5,"loss":1.5,)"
       R"("confusion":{"shape":[3,3],"data":[2,1,0,0,3,0,1,0,1]}})" "\n";
  m += R"({"type":"metrics","split":"train","step":20,"epoch":2,"wall_time":102.0,"loss":null,"eta":0.01})" "\n";
  m += R"({"type":"metrics","split":"valid","step":20,"epoch":2,"wall_time":102.5,"acc":0.75,"loss":1.0,)"
       R"("confusion":{"shape":[3,3],"data":[3,0,0,0,3,0,0,1,1]}})" "\n";
  write(dir / "metrics.jsonl", m + tail);
  return dir;
}

}  // namespace

TEST_CASE("report: a run's page draws every logged metric, the schedules, samples/s and the confusion matrix") {
  const fs::path run = make_run("full", R"({"type":"end","status":"finished","reason":"","step":20,"wall_time":103.0})" "\n");
  const std::string page = nitro::cli::run_report_html(run.string());
  CHECK(page.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">") != std::string::npos);
  CHECK(page.find("<section id=\"metrics\" data-curves=\"3\">") != std::string::npos);    // train/loss, valid/acc, valid/loss
  CHECK(page.find("<section id=\"schedules\" data-curves=\"1\">") != std::string::npos);  // eta
  CHECK(page.find("data-split=\"train\" data-metric=\"loss\" data-label=\"train\" data-points=\"1\"") != std::string::npos);  // null: not drawn
  CHECK(page.find("train (last 2, 1 not finite)") != std::string::npos);
  CHECK(count(page, "<rect class=\"cell\"") == 9);  // the last valid matrix, 3x3
  CHECK(page.find("data-i=\"2\" data-j=\"1\" data-value=\"1\"") != std::string::npos);
  CHECK(page.find("owl predicted as dog: 1") != std::string::npos);  // class names from the manifest's data
  CHECK(page.find("id=\"timing\"") != std::string::npos);
  CHECK(page.find("data-metric=\"samples_per_second\" data-label=\"samples/s\" data-points=\"1\"") != std::string::npos);  // 8 x 10 steps / 1 s
  CHECK(page.find("80 samples/s on average") != std::string::npos);
  CHECK(page.find("a &lt; b &amp; c") != std::string::npos);  // the binding report, escaped
  CHECK(page.find("<td>lr</td><td>0.1</td><td>set</td><td>the rate</td>") != std::string::npos);
  CHECK(page.find("id=\"notes\"") == std::string::npos);  // nothing missing
  CHECK(page.find("http://") == page.find("http://www.w3.org/2000/svg"));  // the SVG namespace is the only URL
}

TEST_CASE("report: a torn metrics.jsonl, a damaged status and an unknown format are said on the page") {
  const fs::path run = make_run("torn", R"({"type":"metrics","split":"valid","st)", "nitro.metrics.v9");
  write(run / "status.json", R"({"state":"runn)");
  fs::remove(run / "binding_report.txt");
  const std::string page = nitro::cli::run_report_html(run.string());
  CHECK(page.find("metrics.jsonl line 6 has no newline (37 bytes): cut short by a crash, or still being written; skipped") != std::string::npos);
  CHECK(page.find("status.json is not a JSON object (damaged or cut short); left out") != std::string::npos);
  CHECK(page.find("binding_report.txt is missing") != std::string::npos);
  CHECK(page.find("metrics.jsonl says format &#39;nitro.metrics.v9&#39;; this report reads nitro.metrics.v1") != std::string::npos);
  CHECK(page.find("<section id=\"metrics\" data-curves=\"3\">") != std::string::npos);  // the complete lines still drawn

  // a damaged line in the middle: skipped and named, the lines after it kept
  const fs::path mid = make_run("mid", "");
  std::string text = nitro_test::slurp(mid / "metrics.jsonl");
  text.insert(text.find("\n") + 1, "{\"type\":\"metr\n");
  write(mid / "metrics.jsonl", text);
  const std::string p2 = nitro::cli::run_report_html(mid.string());
  CHECK(p2.find("metrics.jsonl line 2 is not a JSON object (torn or damaged); skipped") != std::string::npos);
  CHECK(count(p2, "<rect class=\"cell\"") == 9);
}

TEST_CASE("report: E-REC-007 for what is not a run, E-REC-008 for a sweep with nothing to show") {
  const fs::path dir = nitro_test::tmp_dir("report/none");
  fs::create_directories(dir / "plain");
  CHECK_THROWS_WITH_AS(nitro::cli::report_target(dir.string(), (dir / "plain").string()),
                       ("E-REC-007: the folder " + (dir / "plain").string() +
                        " is not a run: it has neither manifest.json nor metrics.jsonl\n"
                        "  fix: name a run folder (<run-dir>/<slug>), a slug or `latest`, or a sweep (sweep-NAME-ID.json or its name)").c_str(),
                       nitro::error);
  write(dir / "notes.json", "{\"a\": 1}");
  CHECK_THROWS_WITH_AS(nitro::cli::report_target(dir.string(), (dir / "notes.json").string()),
                       ("E-REC-007: the file " + (dir / "notes.json").string() + " is not a sweep summary\n"
                        "  fix: name a run folder, a slug or `latest`, or a sweep (sweep-NAME-ID.json or its name)").c_str(),
                       nitro::error);
  const fs::path summary = dir / "sweep-lr-1.json";
  write(summary, R"({"sweep":"lr","experiment":"Toy","points":[]})");
  auto t = nitro::cli::report_target(dir.string(), "lr");  // a sweep's name: its newest summary
  CHECK(t.first == summary.string());
  CHECK(t.second);
  CHECK_THROWS_WITH_AS(nitro::cli::sweep_report_html(summary.string()),
                       ("E-REC-008: the sweep summary " + summary.string() + " lists no points\n"
                        "  fix: run the sweep again (`sweep lr`), or name another sweep").c_str(),
                       nitro::error);
  write(summary, R"({"sweep":"lr","experiment":"Toy","points":[{"index":0,"slug":"gone-p0","state":"finished"}]})");
  CHECK_THROWS_WITH_AS(nitro::cli::sweep_report_html(summary.string()),
                       ("E-REC-008: none of the 1 points of the sweep " + summary.string() + " left a run folder beside it\n"
                        "  fix: keep the summary in the run directory its points were recorded in, or run the sweep again").c_str(),
                       nitro::error);
}

TEST_CASE("report: a sweep's page puts the points side by side, one colour and legend entry per knob value") {
  const fs::path dir = nitro_test::tmp_dir("report/sweep");
  for (std::string lr : {"0.1", "0.2"}) {
    const fs::path run = make_run("sweep_src", "");
    fs::copy(run, dir / ("toy-lr=" + lr), fs::copy_options::recursive);
  }
  write(dir / "sweep-lr-7.json",
        R"({"sweep":"lr","experiment":"Toy","points":[)"
        R"({"index":0,"slug":"toy-lr=0.1","program":"Toy<4>","selection":{"variant":"v","sets":[["seed","1"],["lr","0.1"]]},"state":"finished","metrics":{}},)"
        R"({"index":1,"slug":"toy-lr=0.2","program":"Toy<4>","selection":{"variant":"v","sets":[["seed","1"],["lr","0.2"]]},"state":"finished","metrics":{}},)"
        R"({"index":2,"slug":"toy-lr=0.3","program":"Toy<4>","selection":{"variant":"v","sets":[["seed","1"],["lr","0.3"]]},"state":"failed","metrics":{"valid/acc":0.1}}]})");
  const std::string page = nitro::cli::sweep_report_html((dir / "sweep-lr-7.json").string());
  CHECK(count(page, "<tr class=\"point\"") == 3);
  CHECK(page.find("point 2 (toy-lr=0.3) has no run folder beside the summary: only its summary row is shown") != std::string::npos);
  CHECK(page.find("<section id=\"curves\" data-curves=\"6\">") != std::string::npos);  // 3 metrics x 2 points with records
  CHECK(count(page, "<g class=\"legend-item\" data-label=\"lr=0.1\">") == 4);           // seed is the same in every point: not in the legend
  CHECK(count(page, "<g class=\"legend-item\" data-label=\"lr=0.2\">") == 4);
  CHECK(page.find("<th>lr</th><th>program</th><th>state</th><th>valid/acc</th>") != std::string::npos);
  CHECK(page.find("<td class=\"num\">0.1</td>") != std::string::npos);  // the missing point's summary metrics
}

TEST_CASE("watch's curves: sparklines of train/loss and the monitored metric") {
  CHECK(nitro::cli::sparkline({1, 2, 3, 4, 5, 6, 7, 8}) == "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588");
  CHECK(nitro::cli::sparkline({2, 2}) == "\u2584\u2584");
  CHECK(nitro::cli::sparkline({1, std::nan(""), 0}) == "\u2588 \u2581");
  CHECK(nitro::cli::sparkline({0, 1, 2, 3}, 2) == "\u2581\u2588");  // the newest `width` values
  std::vector<nitro::ordered_json> lines = {
      nitro::ordered_json::parse(R"({"type":"metrics","split":"train","step":1,"loss":2.0})"),
      nitro::ordered_json::parse(R"({"type":"metrics","split":"valid","step":1,"acc":0.5})"),
      nitro::ordered_json::parse(R"({"type":"metrics","split":"train","step":2,"loss":1.0})"),
      nitro::ordered_json::parse(R"({"type":"metrics","split":"valid","step":2,"acc":0.75})")};
  CHECK(nitro::cli::curves_text(lines, "valid/acc") ==
        "curves:\n  train/loss  \u2588\u2581  1\n  valid/acc   \u2581\u2588  0.7500  (monitor)\n");
  const auto st = nitro::ordered_json::parse(R"({"best":{"metric":"valid/loss"}})");
  CHECK(nitro::cli::monitored_metric(st, nitro::ordered_json::object()) == "valid/loss");
  const auto m = nitro::ordered_json::parse(R"j({"run_keywords":{"monitor":{"value":"valid.acc (max)"}}})j");
  CHECK(nitro::cli::monitored_metric(nitro::ordered_json::object(), m) == "valid/acc");
}

TEST_CASE("the JSONL logger records a split's [C, C] tensor metrics row-major, which the report draws; other tensors stay out") {
  const fs::path dir = nitro_test::tmp_dir("report/jsonl");
  nitro::run_info info;
  info.experiment = "Toy<4>";
  info.dir = dir;
  info.batch_size = 8;
  nitro::jsonl_logger j;
  j.on_setup(info);
  nitro::metric_values m;
  m.scalars["acc"] = 0.5;
  nitro::Tensor cm = nitro::Tensor::owned({2, 2});
  cm(0, 0) = 3; cm(0, 1) = 1; cm(1, 0) = 2; cm(1, 1) = 4;  // (true, predicted)
  m.tensors["confusion"] = cm;
  m.tensors["outputs"] = nitro::Tensor::owned({2, 5});    // a concatenation: not square, not recorded
  j.on_eval(7, 1, "valid", m);
  j.on_end(nitro::run_status::finished, "");
  const std::string text = nitro_test::slurp(dir / "metrics.jsonl");
  CHECK(text.find(R"("acc":0.5,"confusion":{"shape":[2,2],"data":[3,1,2,4]}})") != std::string::npos);
  CHECK(text.find("outputs") == std::string::npos);
  const auto v = nitro::cli::detail::load_run(dir.string());
  const auto t = nitro::cli::detail::run_square_tensors(v);
  REQUIRE(t.size() == 1);
  CHECK(t[0].split == "valid");
  CHECK(t[0].step == 7);
  CHECK(t[0].values == std::vector<double>{3, 1, 2, 4});
}
