// The shared services the daemons use (issue 54): diode/sqlite.h,
// diode/health_http.h and diode/prometheus.h.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include "diode/health_http.h"
#include "diode/prometheus.h"
#include "diode/sqlite.h"

namespace {

std::string temp_db(const char* name) {
  auto p = std::filesystem::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()) + ".sqlite");
  std::filesystem::remove(p);
  return p.string();
}

TEST(SharedSqlite, StatementsTransactionsAndErrors) {
  const std::string path = temp_db("diode-shared-sqlite");
  {
    diode::sqlite::Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("CREATE TABLE t(k TEXT PRIMARY KEY, n INTEGER, b BLOB)");
    auto ins = db.prepare("INSERT INTO t VALUES(?,?,?)");
    ins.bind(1, "a").bind(2, int64_t{7}).bind_blob(3, std::string("x\0y", 3));
    ins.run();
    EXPECT_EQ(db.changes(), 1);
    {
      diode::sqlite::Transaction tx(db);
      ins.bind(1, "b").bind(2, int64_t{8}).bind_null(3);
      ins.run();
    }  // not committed: rolled back
    {
      diode::sqlite::Transaction tx(db);
      ins.bind(1, "c").bind(2, int64_t{9}).bind_null(3);
      ins.run();
      tx.commit();
    }
    auto sel = db.prepare("SELECT k, n, b FROM t ORDER BY k");
    std::string keys;
    while (sel.step()) keys += sel.text(0);
    EXPECT_EQ(keys, "ac");
    sel.reset();
    ASSERT_TRUE(sel.step());
    EXPECT_EQ(sel.int64(1), 7);
    EXPECT_EQ(sel.blob(2), std::string("x\0y", 3));
    ASSERT_TRUE(sel.step());
    EXPECT_TRUE(sel.is_null(2));
    // A failed step resets the statement, which can then be reused.
    ins.bind(1, "a").bind(2, int64_t{1}).bind_null(3);
    EXPECT_THROW(ins.step(), std::runtime_error);
    ins.reset();
    ins.bind(1, "d").bind(2, int64_t{1}).bind_null(3);
    EXPECT_NO_THROW(ins.run());
    EXPECT_THROW(db.prepare("SELECT nope FROM t"), std::runtime_error);
  }
  try {
    diode::sqlite::Db bad("/nonexistent-dir/x.sqlite", SQLITE_OPEN_READWRITE, "catalog ");
    ADD_FAILURE() << "opened a database in a missing directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open catalog /nonexistent-dir/x.sqlite: "), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(SharedHealthServer, HealthzStatusAndMetricsText) {
  bool ok = true;
  diode::http::HealthServer::Options o;
  o.metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";
  diode::http::HealthServer srv(
      [&ok]() -> diode::http::HealthServer::Health {
        return {ok ? 200 : 503, {{"status", ok ? "ok" : "unhealthy"}}};
      },
      [] { return std::string("# HELP x An x.\n# TYPE x gauge\nx 1\n"); }, o);
  ASSERT_TRUE(srv.start("127.0.0.1", 0));
  ASSERT_GT(srv.port(), 0);
  httplib::Client c("127.0.0.1", srv.port());
  auto h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->body, "{\"status\":\"ok\"}\n");
  EXPECT_EQ(h->get_header_value("Content-Type"), "application/json");
  ok = false;
  h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->body, "# HELP x An x.\n# TYPE x gauge\nx 1\n");
  EXPECT_EQ(m->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  auto nf = c.Get("/other");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  // An address it cannot bind: start() says so, it does not throw (the caller words the error).
  diode::http::HealthServer bad([] { return diode::http::HealthServer::Health{}; }, [] { return std::string(); });
  EXPECT_FALSE(bad.start("256.0.0.1", 0));
  srv.stop();
}

TEST(SharedPrometheus, HeaderMetricAndLabelEscaping) {
  std::ostringstream o;
  diode::prometheus::write_metric(o, "diode_x_total", "counter", "Things.", uint64_t{3});
  EXPECT_EQ(o.str(), "# HELP diode_x_total Things.\n# TYPE diode_x_total counter\ndiode_x_total 3\n");
  EXPECT_EQ(diode::prometheus::label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
