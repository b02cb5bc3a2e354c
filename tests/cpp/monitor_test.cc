// The monitor's pure logic against hand-computed answers: rows from two
// snapshots, the recording's timeline rows read back, the summary and the tails after the marks of
// fixtures/ckpt.log over fixtures/recording.csv (10 ms samples; two OpenMP
// workers spin 200 ms after the first update_end, 41 ms after the second).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "monitor/monitor.h"

namespace threadburn::monitor {
namespace {

const std::string kFixtures = MONITOR_FIXTURES_DIR;

void set_tz(const char* tz) {
  setenv("TZ", tz, 1);
  tzset();
}

ThreadStat stat(pid_t tid, const std::string& name, int64_t cpu_ms) {
  ThreadStat s;
  s.tid = tid;
  s.name = name;
  s.cpu_ns = cpu_ms * 1000000;
  return s;
}

const Row* find(const std::vector<Row>& rows, pid_t tid) {
  for (const auto& r : rows) {
    if (r.tid == tid) return &r;
  }
  return nullptr;
}

std::vector<Row> read_fixture_rows() {
  std::ifstream in(kFixtures + "/recording.csv");
  std::string line;
  std::vector<Row> rows;
  RecordingReader reader;
  Row r;
  for (int n = 1; std::getline(in, line); ++n) {
    const bool is_row = reader.read(line, &r);
    EXPECT_EQ(is_row, n > 2) << line;  // the comment and the column line are no rows
    if (is_row) rows.push_back(r);
  }
  return rows;
}

TEST(Interval, RatesForBornLivingAndGoneThreads) {
  Snapshot prev{10000000, {stat(1, "main", 10), stat(2, "idle", 5), stat(4, "dying", 7)}};
  Snapshot cur{12000000, {stat(1, "main", 12), stat(2, "idle", 5), stat(3, "born", 1)}};
  const auto rows = interval_rows(prev, cur, 1000000000000LL * 1000000);
  ASSERT_EQ(rows.size(), 4u);  // process, main, born, dying; idle used nothing
  SummaryBuilder summary(0.05, 10.0);
  for (const auto& r : rows) summary.add(r);
  EXPECT_EQ(summary.max_threads(), 3);  // alive at the end of the interval
  EXPECT_EQ(rows[0].tid, kProcessTid);
  EXPECT_EQ(rows[0].name, "[process]");
  EXPECT_DOUBLE_EQ(rows[0].cpu_ms, 3.0);
  EXPECT_DOUBLE_EQ(rows[0].cores, 1.5);
  EXPECT_DOUBLE_EQ(rows[0].dt_ms, 2.0);
  EXPECT_DOUBLE_EQ(rows[0].t_ms, 12.0);
  EXPECT_EQ(rows[0].unix_ms, 1000000000012LL);
  EXPECT_EQ(rows[0].threads, 3);
  EXPECT_DOUBLE_EQ(find(rows, 1)->cores, 1.0);
  EXPECT_EQ(find(rows, 1)->change, "");
  EXPECT_EQ(find(rows, 2), nullptr);
  EXPECT_DOUBLE_EQ(find(rows, 3)->cpu_ms, 1.0);  // born in between: counts from 0
  EXPECT_EQ(find(rows, 3)->change, "new");
  EXPECT_DOUBLE_EQ(find(rows, 4)->cpu_ms, 0.0);
  EXPECT_EQ(find(rows, 4)->change, "gone");
  EXPECT_EQ(find(rows, 4)->name, "dying");
}

TEST(Interval, ReusedTidCountsAsNewAndRenameIsAChange) {
  Snapshot prev{0, {stat(5, "old", 50), stat(6, "python3", 1)}};
  Snapshot cur{1000000, {stat(5, "fresh", 2), stat(6, "tb-omp-1", 1)}};
  const auto rows = interval_rows(prev, cur, 0);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(find(rows, 5)->cpu_ms, 2.0);
  EXPECT_EQ(find(rows, 5)->change, "new");
  EXPECT_DOUBLE_EQ(find(rows, 6)->cpu_ms, 0.0);  // no CPU, but the name changed
  EXPECT_EQ(find(rows, 6)->change, "renamed");
  EXPECT_DOUBLE_EQ(rows[0].cpu_ms, 2.0);
}

TEST(Interval, AnEndedProcessEndsEveryThreadStillListed) {
  // The last sample still lists the zombie leader (no CPU, so no row) and a
  // thread in its exit (1 ms, a row): each gets a zero row after it.
  Snapshot prev{10000000, {stat(1, "main", 10), stat(2, "spinner", 200)}};
  Snapshot last{12000000, {stat(1, "main", 10), stat(2, "spinner", 201)}};
  ASSERT_EQ(interval_rows(prev, last, 0).size(), 2u);  // process, spinner
  const auto gone = exit_rows(last, 0);
  ASSERT_EQ(gone.size(), 2u);
  for (const auto& r : gone) {
    EXPECT_EQ(r.change, "gone");
    EXPECT_DOUBLE_EQ(r.cores, 0.0);
    EXPECT_DOUBLE_EQ(r.t_ms, 12.0);
  }
  EXPECT_EQ(recording_row(gone[0]), "12.000,thread:1:main,0.0000\n");
  EXPECT_EQ(recording_row(gone[1]), "12.000,thread:2:spinner,0.0000\n");
}

TEST(Interval, UnixMsIsTheFlooredEndOfTheInterval) {
  Snapshot prev{0, {stat(1, "a", 0)}};
  Snapshot cur{1999999, {stat(1, "a", 1)}};
  EXPECT_EQ(interval_rows(prev, cur, 5000000LL * 1000000 + 400000)[0].unix_ms, 5000002LL);
}

TEST(Recording, HeaderRowsAndQuotes) {
  EXPECT_EQ(recording_header(1669214839491123456LL, 42, 1000, 0.2),
            "# threadburn timeline 1; origin=monitor_start; burn_threshold_cores=0.2; t0_unix_ms=1669214839491.123; "
            "pid=42; period_us=1000\nt_ms,series,cores\n");
  Row r{1669214839551, 60.0, 1.0004, 101, "tb-omp-1", 0.9996, 0.99910, 3, "new"};
  EXPECT_EQ(recording_row(r), "60.000,thread:101:tb-omp-1,0.9991\n");
  r.name = "say \"a,b\"";
  EXPECT_EQ(recording_row(r), "60.000,\"thread:101:say \"\"a,b\"\"\",0.9991\n");
  r.tid = kProcessTid;
  EXPECT_EQ(recording_row(r), "60.000,process,0.9991\n");
}

TEST(Recording, ReadBackTheClockTheNamesAndTheCpu) {
  // Two intervals: 0..10 ms and 10..12.5 ms; t0 at ...491.4 ms wall clock.
  RecordingReader reader;
  Row r;
  EXPECT_FALSE(reader.read("# threadburn timeline 1; origin=monitor_start; burn_threshold_cores=0.05; "
                           "t0_unix_ms=1000491.400; pid=7; period_us=10000", &r));
  EXPECT_FALSE(reader.read("t_ms,series,cores", &r));
  ASSERT_TRUE(reader.read("10.000,process,0.5000", &r));
  EXPECT_EQ(r.tid, kProcessTid);
  EXPECT_EQ(r.name, kProcessName);
  EXPECT_DOUBLE_EQ(r.dt_ms, 10.0);
  EXPECT_DOUBLE_EQ(r.cpu_ms, 5.0);
  EXPECT_EQ(r.unix_ms, 1000501);  // floor(1000491.4 + 10)
  ASSERT_TRUE(reader.read("10.000,\"thread:101:a:b,c\",0.5000\r", &r));
  EXPECT_EQ(r.tid, 101);
  EXPECT_EQ(r.name, "a:b,c");
  EXPECT_DOUBLE_EQ(r.dt_ms, 10.0);
  ASSERT_TRUE(reader.read("12.500,process,2.0000", &r));
  EXPECT_DOUBLE_EQ(r.dt_ms, 2.5);
  EXPECT_DOUBLE_EQ(r.cpu_ms, 5.0);
  EXPECT_EQ(r.unix_ms, 1000503);  // floor(1000503.9)
  ASSERT_TRUE(reader.read("12.500,thread:9:x,2.0000", &r));
  EXPECT_DOUBLE_EQ(r.dt_ms, 2.5);
  EXPECT_FALSE(reader.read("12.500,other_series,1", &r));
  EXPECT_FALSE(reader.read("12.500,\"open,1", &r));
  EXPECT_FALSE(reader.read("x,process,1", &r));
}

TEST(Summary, TotalsFromTheFixture) {
  SummaryBuilder s(0.05, 10.0);
  for (const auto& r : read_fixture_rows()) s.add(r);
  EXPECT_EQ(s.samples(), 227);
  EXPECT_DOUBLE_EQ(s.span_ms(), 2270.0);
  EXPECT_EQ(s.max_threads(), 0);  // counted while recording (Interval test), not written to the file
  const auto threads = s.threads();
  ASSERT_EQ(threads.size(), 4u);
  EXPECT_EQ(threads[0].name, "tb-omp-2");  // most CPU first
  EXPECT_NEAR(threads[0].cpu_ms, 280.3, 1e-9);
  EXPECT_DOUBLE_EQ(threads[0].busy_ms, 280.0);  // its 0.03-core interval is below 0.05
  EXPECT_EQ(threads[1].tid, 101);
  EXPECT_DOUBLE_EQ(threads[1].last_busy_ms, 2120.0);
  EXPECT_EQ(threads[2].name, "python3");
  EXPECT_DOUBLE_EQ(threads[2].cpu_ms, 33.0);
  EXPECT_DOUBLE_EQ(threads[2].first_busy_ms, 50.0);
  EXPECT_EQ(threads[3].name, "a,b");
  EXPECT_DOUBLE_EQ(threads[3].max_cores, 0.5);
  EXPECT_NEAR(s.process().cpu_ms, 598.3, 1e-9);
  EXPECT_DOUBLE_EQ(s.process().busy_ms, 290.0);
  EXPECT_DOUBLE_EQ(s.process().max_cores, 3.0);

  const std::string text = format_summary(s, 2);
  EXPECT_NE(text.find("tb-omp-2"), std::string::npos) << text;
  EXPECT_NE(text.find("(2 others)"), std::string::npos) << text;
  EXPECT_EQ(text.find("python3"), std::string::npos) << text;  // folded into the others
  EXPECT_NE(text.find("[process]"), std::string::npos) << text;
}

TEST(Summary, RatesAreTakenOverBucketsNotTickLumps) {
  // A thread that runs without a break: schedstat moves in 5 ms lumps, so a
  // 1 ms interval shows 5 cores; over 10 ms buckets it is one core.
  SummaryBuilder s(0.05, 10.0);
  for (int t = 1; t <= 20; ++t) {
    const double cpu = t % 5 == 0 ? 5.0 : 0.0;
    s.add(Row{0, static_cast<double>(t), 1.0, 0, "[process]", cpu, cpu, 1, ""});
    if (cpu > 0) s.add(Row{0, static_cast<double>(t), 1.0, 9, "worker", cpu, cpu, 1, ""});
  }
  ASSERT_EQ(s.threads().size(), 1u);
  EXPECT_DOUBLE_EQ(s.threads()[0].max_cores, 1.0);
  EXPECT_DOUBLE_EQ(s.threads()[0].busy_ms, 20.0);
  EXPECT_DOUBLE_EQ(s.threads()[0].last_busy_ms, 20.0);
  EXPECT_DOUBLE_EQ(s.process().max_cores, 1.0);
  EXPECT_DOUBLE_EQ(s.process().cpu_ms, 20.0);
}

TEST(Summary, ALongIntervalIsSpreadOverItsBuckets) {
  // The monitor was starved for 30 ms: 15 ms of CPU over (10, 40] is 0.5 cores
  // in each of three buckets, not 1.5 cores in the last one.
  SummaryBuilder s(0.6, 10.0);
  s.add(Row{0, 10.0, 10.0, 3, "w", 0.0, 0.0, 1, ""});
  s.add(Row{0, 40.0, 30.0, 3, "w", 15.0, 0.5, 1, ""});
  EXPECT_DOUBLE_EQ(s.threads()[0].max_cores, 0.5);
  EXPECT_DOUBLE_EQ(s.threads()[0].busy_ms, 0.0);
  EXPECT_DOUBLE_EQ(s.threads()[0].cpu_ms, 15.0);
}

TEST(Log, ParsesSeedLineAsLocalTime) {
  set_tz("UTC");
  auto m = parse_log_line("2022-11-23 14:47:19,534 - ckpt - update_start");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->unix_ms, 1669214839534LL);
  EXPECT_EQ(m->name, "ckpt");
  EXPECT_EQ(m->event, "update_start");
  // The same wall-clock text one hour east of UTC is one hour earlier.
  set_tz("CET-1");
  m = parse_log_line("2022-11-23 14:47:19,534 - ckpt - update_start\r");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->unix_ms, 1669214839534LL - 3600000);
  EXPECT_EQ(m->event, "update_start");
  set_tz("UTC");
  // another log of the same shape; the event is the value.
  m = parse_log_line("2022-11-23 14:47:19,553 - sgd_profiler - 1783.5");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->event, "1783.5");
}

TEST(Log, RejectsOtherShapes) {
  set_tz("UTC");
  for (const char* line : {"", " # time.sleep(2)", "2022-11-23 14:47:19 - ckpt - x",
                           "2022-13-23 14:47:19,534 - ckpt - x", "2022-11-23 14:47:19,534 - ckpt",
                           "2022-11-23 14:47:19,534 ckpt update_start", "22-11-23 14:47:19,534 - a - b",
                           "2022-11-23 14:47:19,534 -  - b"}) {
    EXPECT_FALSE(parse_log_line(line)) << line;
  }
}

TEST(Log, ReadsTheFixtureSkippingJunk) {
  set_tz("UTC");
  std::ifstream in(kFixtures + "/ckpt.log");
  const auto marks = read_marks(in);
  ASSERT_EQ(marks.size(), 7u);
  EXPECT_EQ(marks[0].event, "sleep_start");
  EXPECT_EQ(marks[2].unix_ms, 1669214839551LL);
  EXPECT_EQ(marks[6].event, "sleep_end");
}

TEST(Tails, AfterEachUpdateEndUntilTheNextMark) {
  set_tz("UTC");
  std::ifstream in(kFixtures + "/ckpt.log");
  TailBuilder tails(read_marks(in), "update_end", 0.05);
  for (const auto& r : read_fixture_rows()) tails.add(r);
  const auto& w = tails.windows();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].horizon_unix_ms, 1669214841554LL);  // sleep_end
  EXPECT_DOUBLE_EQ(w[0].by_tid.at(101).tail_ms, 200.0);
  EXPECT_DOUBLE_EQ(w[0].by_tid.at(101).burn_ms, 200.0);
  EXPECT_DOUBLE_EQ(w[0].by_tid.at(102).tail_ms, 200.0);  // 0.03 cores after it: below
  EXPECT_NEAR(w[0].by_tid.at(102).burn_ms, 200.3, 1e-9);
  EXPECT_DOUBLE_EQ(w[0].by_tid.at(100).tail_ms, 10.0);
  EXPECT_DOUBLE_EQ(w[0].by_tid.at(100).burn_ms, 3.0);
  EXPECT_DOUBLE_EQ(w[0].by_tid.at(kProcessTid).tail_ms, 200.0);
  EXPECT_NEAR(w[0].by_tid.at(kProcessTid).burn_ms, 403.3, 1e-9);
  // Second update_end at 21.570: the row ending 21.561 is before it.
  EXPECT_EQ(w[1].by_tid.count(100), 0u);
  EXPECT_DOUBLE_EQ(w[1].by_tid.at(101).tail_ms, 41.0);
  EXPECT_DOUBLE_EQ(w[1].by_tid.at(101).burn_ms, 50.0);
  EXPECT_EQ(w[1].horizon_unix_ms, 1669214843571LL);

  SummaryBuilder s(0.05, 10.0);
  for (const auto& r : read_fixture_rows()) s.add(r);
  const std::string text = format_tails(tails, s, "update_end");
  EXPECT_NE(text.find("2 events recorded"), std::string::npos) << text;
  EXPECT_NE(text.find("120.5"), std::string::npos) << text;  // tb-omp-1: (200 + 41) / 2
}

TEST(Tails, OnlyRowsStrictlyBetweenTheMarksCount) {
  std::vector<Mark> marks{{1000, "ckpt", "update_end"}, {1100, "ckpt", "sleep_end"}};
  TailBuilder tails(marks, "update_end", 0.05);
  Row r;
  r.tid = 7;
  r.cores = 1;
  r.cpu_ms = 1;
  for (int64_t end : {1000, 1050, 1100, 1150}) {
    r.unix_ms = end;
    tails.add(r);
  }
  ASSERT_EQ(tails.windows().size(), 1u);
  // Only the row ending at 1050: 1000 and 1100 end in the marks' own ms.
  EXPECT_DOUBLE_EQ(tails.windows()[0].by_tid.at(7).tail_ms, 50.0);
  EXPECT_DOUBLE_EQ(tails.windows()[0].by_tid.at(7).burn_ms, 1.0);
  EXPECT_TRUE(TailBuilder(marks, "no_such_event", 0.05).windows().empty());
  // A mark from before the recording (an appended log) is not averaged in.
  marks.insert(marks.begin(), {{10, "ckpt", "update_end"}, {20, "ckpt", "sleep_end"}});
  TailBuilder old_too(marks, "update_end", 0.05);
  for (int64_t end : {1050, 1099}) {
    r.unix_ms = end;
    old_too.add(r);
  }
  SummaryBuilder s(0.05, 10.0);
  r.t_ms = 1;
  s.add(r);
  const std::string text = format_tails(old_too, s, "update_end");
  EXPECT_NE(text.find("(1 events recorded"), std::string::npos) << text;
  EXPECT_NE(text.find(" 99.0"), std::string::npos) << text;
}


// The window after update_end (1000) up to sleep_end (1600), in 10 ms rows
// (t_ms = unix ms - 1000): worker 8 spins to 1200; main (7) logs the mark
// and goes to sleep (0.2 cores in the row ending 1010), then wakes and works
// 30 ms right before sleep_end (rows ending 1580..1600), as a program's next
// action. Every row has its process row first, as a recording does.
std::vector<Row> window_rows(const std::vector<std::pair<int64_t, double>>& main_cores) {
  std::vector<Row> rows;
  for (int64_t end = 1010; end <= 1650; end += 10) {
    Row p;
    p.unix_ms = end;
    p.t_ms = static_cast<double>(end - 1000);
    p.dt_ms = 10;
    p.tid = kProcessTid;
    std::vector<Row> threads;
    if (end <= 1200) {
      Row w = p;
      w.tid = 8;
      w.cores = 1;
      w.cpu_ms = 10;
      threads.push_back(w);
    }
    for (const auto& [at, cores] : main_cores) {
      if (at != end) continue;
      Row m = p;
      m.tid = 7;
      m.cores = cores;
      m.cpu_ms = 10 * cores;
      threads.push_back(m);
    }
    for (const Row& t : threads) {
      p.cpu_ms += t.cpu_ms;
      p.cores += t.cores;
    }
    rows.push_back(p);
    rows.insert(rows.end(), threads.begin(), threads.end());
  }
  return rows;
}

TailBuilder run_tails(const std::vector<Row>& rows, pid_t marking, double sleep_min_ms = kMarkSleepMinMs) {
  std::vector<Mark> marks{{1000, "ckpt", "update_end"}, {1600, "ckpt", "sleep_end"}};
  TailBuilder tails(marks, "update_end", 0.05, marking, sleep_min_ms);
  for (const Row& r : rows) tails.scan(r);
  for (const Row& r : rows) tails.add(r);
  return tails;
}

TEST(Tails, TheMarkingThreadsWakeEndsTheWindow) {
  const auto rows = window_rows({{1010, 0.2}, {1580, 1.0}, {1590, 1.0}, {1600, 1.0}});
  // Until the next mark (no marking thread): main's work before sleep_end is its tail.
  const TailBuilder before = run_tails(rows, kNoMarkingThread);
  ASSERT_EQ(before.windows().size(), 1u);
  EXPECT_DOUBLE_EQ(before.windows()[0].by_tid.at(kProcessTid).tail_ms, 590.0);
  EXPECT_DOUBLE_EQ(before.windows()[0].by_tid.at(7).tail_ms, 590.0);
  // Main writes the marks: the window ends with the row ending 1570, before the one it woke in.
  const TailBuilder tails = run_tails(rows, 7);
  const MarkWindow& w = tails.windows()[0];
  EXPECT_TRUE(w.cut());
  EXPECT_DOUBLE_EQ(w.end_t_ms, 570.0);
  EXPECT_EQ(w.end_unix_ms, 1570);
  EXPECT_DOUBLE_EQ(w.length_ms(), 570.0);
  EXPECT_DOUBLE_EQ(w.by_tid.at(kProcessTid).tail_ms, 200.0);
  EXPECT_DOUBLE_EQ(w.by_tid.at(kProcessTid).burn_ms, 202.0);
  EXPECT_DOUBLE_EQ(w.by_tid.at(8).tail_ms, 200.0);
  EXPECT_DOUBLE_EQ(w.by_tid.at(7).tail_ms, 10.0);
  EXPECT_DOUBLE_EQ(w.by_tid.at(7).burn_ms, 2.0);
  SummaryBuilder s(0.05, 10.0);
  for (const Row& r : rows) s.add(r);
  const std::string text = format_tails(tails, s, "update_end");
  EXPECT_NE(text.find("or until thread 7 (it writes the marks) woke for it from a sleep (>= 20 ms without CPU): "
                      "1 of 1 windows ended there, mean 570.0 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("min_tail_ms"), std::string::npos) << text;
}

TEST(Tails, AWindowRunsToTheNextMarkWhereTheMarkingThreadDidNotSleepBeforeIt) {
  // Main busy all along (a step without a sleep): its work is the window's, no cut.
  std::vector<std::pair<int64_t, double>> busy;
  for (int64_t end = 1010; end <= 1650; end += 10) busy.push_back({end, 1.0});
  const TailBuilder all_along = run_tails(window_rows(busy), 7);
  EXPECT_FALSE(all_along.windows()[0].cut());
  EXPECT_DOUBLE_EQ(all_along.windows()[0].by_tid.at(7).tail_ms, 590.0);
  EXPECT_DOUBLE_EQ(all_along.windows()[0].length_ms(), 600.0);
  // Pauses shorter than the sleep rule (a /proc recording's tick lumps: 10 ms
  // of CPU every 20 ms here) are not sleeps.
  std::vector<std::pair<int64_t, double>> lumps;
  for (int64_t end = 1010; end <= 1650; end += 20) lumps.push_back({end, 1.0});
  EXPECT_FALSE(run_tails(window_rows(lumps), 7).windows()[0].cut());
  // Asleep from the mark into the next one: nothing to leave out. After a
  // short action at 1290 (its CPU is in the window: tail 300) the longest
  // stretch is the one that runs into the mark: no cut.
  const TailBuilder blip = run_tails(window_rows({{1010, 0.2}, {1300, 0.5}}), 7);
  EXPECT_FALSE(blip.windows()[0].cut());
  EXPECT_DOUBLE_EQ(blip.windows()[0].by_tid.at(7).tail_ms, 300.0);
  EXPECT_DOUBLE_EQ(blip.windows()[0].by_tid.at(kProcessTid).tail_ms, 300.0);
  EXPECT_FALSE(run_tails(window_rows({{1010, 0.2}}), 7).windows()[0].cut());
  // The longest stretch is the sleep: woke at 1300 for 20 ms, paused 250 ms,
  // woke for the mark at 1570: the window ends at 1300.
  const TailBuilder twice =
      run_tails(window_rows({{1010, 0.2}, {1310, 1.0}, {1320, 1.0}, {1580, 1.0}, {1590, 1.0}, {1600, 1.0}}), 7);
  EXPECT_EQ(twice.windows()[0].end_unix_ms, 1300);
  EXPECT_DOUBLE_EQ(twice.windows()[0].by_tid.at(7).tail_ms, 10.0);
  // Woken at 1540, then a wait of 20 ms for a core before the work and the
  // mark (a loaded machine): no sleep, the window ends at the wake (1540),
  // not at 1570 (seen as a 600 ms tail of the main thread under load).
  const TailBuilder waited = run_tails(window_rows({{1010, 0.2}, {1550, 0.1}, {1580, 1.0}, {1590, 1.0}}), 7);
  EXPECT_EQ(waited.windows()[0].end_unix_ms, 1540);
  EXPECT_DOUBLE_EQ(waited.windows()[0].by_tid.at(7).tail_ms, 10.0);
  EXPECT_DOUBLE_EQ(waited.windows()[0].by_tid.at(kProcessTid).tail_ms, 200.0);
  // A stretch into the mark shorter than the rule (woke at 1570 for 10 ms,
  // then 20 ms without CPU before the mark): the window ends at 1570.
  EXPECT_EQ(run_tails(window_rows({{1010, 0.2}, {1580, 1.0}}), 7).windows()[0].end_unix_ms, 1570);
  // A pause shorter than the rule before the work is no sleep: busy to 1540,
  // 30 ms without CPU, work from 1570: a cut with the 20 ms rule, none with 60 ms.
  std::vector<std::pair<int64_t, double>> pause;
  for (int64_t end = 1010; end <= 1540; end += 10) pause.push_back({end, 1.0});
  for (int64_t end : {1580, 1590, 1600}) pause.push_back({end, 1.0});
  EXPECT_EQ(run_tails(window_rows(pause), 7).windows()[0].end_unix_ms, 1570);
  EXPECT_FALSE(run_tails(window_rows(pause), 7, 60).windows()[0].cut());
}

// A worker that waits for a core in its spin (a loaded machine) holds none
// meanwhile: its tail is where it last held one, and the window's run-queue
// wait says how long it waited. Waits from the scheduler's records: the part
// inside the window counts (to the thread and the process), the part before
// the mark, after the marking thread's wake (1570) or in a window without
// rows does not.
TEST(Tails, TheRunQueueWaitInTheWindowIsCountedPerThreadAndProcess) {
  TailBuilder tails = run_tails(window_rows({{1010, 0.2}, {1580, 1.0}, {1590, 1.0}, {1600, 1.0}}), 7);
  EXPECT_FALSE(tails.waits_known());
  tails.add_wait(8, 990.0, 1050.5);   // 50.5 ms inside: from the mark on
  tails.add_wait(8, 1100.0, 1130.0);  // 30 ms inside
  tails.add_wait(7, 1560.0, 1575.0);  // 10 ms before the wake at 1570, 5 after it
  tails.add_wait(8, 1600.0, 1700.0);  // after the window
  tails.add_wait(8, 900.0, 999.0);    // before the mark
  ASSERT_TRUE(tails.waits_known());
  const MarkWindow& w = tails.windows()[0];
  EXPECT_DOUBLE_EQ(w.by_tid.at(8).wait_ms, 80.5);
  EXPECT_DOUBLE_EQ(w.by_tid.at(7).wait_ms, 10.0);
  EXPECT_DOUBLE_EQ(w.by_tid.at(kProcessTid).wait_ms, 90.5);
  EXPECT_DOUBLE_EQ(w.by_tid.at(8).tail_ms, 200.0);  // the rows' tail is unchanged
  SummaryBuilder s(0.05, 10.0);
  for (const Row& r : window_rows({{1010, 0.2}})) s.add(r);
  const std::string text = format_tails(tails, s, "update_end");
  EXPECT_NE(text.find("mean_wait_ms"), std::string::npos) << text;
  EXPECT_NE(text.find("        80.5"), std::string::npos) << text;
  EXPECT_NE(text.find("        90.5"), std::string::npos) << text;
  // No waits given (the /proc mode): no column.
  const TailBuilder plain = run_tails(window_rows({{1010, 0.2}}), 7);
  EXPECT_EQ(format_tails(plain, s, "update_end").find("mean_wait_ms"), std::string::npos);
  // A wait in a window that saw no rows (before the recording) is not counted.
  std::vector<Mark> marks{{1000, "ckpt", "update_end"}, {1600, "ckpt", "sleep_end"}};
  TailBuilder empty(marks, "update_end", 0.05, 7);
  empty.add_wait(8, 1010.0, 1050.0);
  EXPECT_TRUE(empty.windows()[0].by_tid.empty());
}


}  // namespace
}  // namespace threadburn::monitor
