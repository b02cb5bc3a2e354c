// The exact mode's files and figures from known intervals: tracepoint
// formats as two kernels write them, the intervals file read back, exact
// bins, the burn after the main thread's sleeps, the waits table.
#include <gtest/gtest.h>

#include <cstring>

#include "core/tracefs.h"
#include "monitor/binner.h"
#include "monitor/gaps.h"
#include "monitor/intervals_file.h"
#include "monitor/waits.h"

namespace threadburn::monitor {
namespace {

constexpr int64_t kMs = 1000000;

// sched_migrate_task as Linux 6.18 writes it (comm a __data_loc string) and
// as 6.1 does (a char array): the same fields at other offsets.
const char* kMigrate618 = R"(name: sched_migrate_task
ID: 371
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__data_loc char[] comm;	offset:8;	size:4;	signed:0;
	field:pid_t pid;	offset:12;	size:4;	signed:1;
	field:int prio;	offset:16;	size:4;	signed:1;
	field:int orig_cpu;	offset:20;	size:4;	signed:1;
	field:int dest_cpu;	offset:24;	size:4;	signed:1;

print fmt: "comm=%s pid=%d prio=%d orig_cpu=%d dest_cpu=%d", __get_str(comm), REC->pid, REC->prio, REC->orig_cpu, REC->dest_cpu
)";
const char* kMigrate61 = R"(name: sched_migrate_task
ID: 305
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:char comm[16];	offset:8;	size:16;	signed:0;
	field:pid_t pid;	offset:24;	size:4;	signed:1;
	field:int prio;	offset:28;	size:4;	signed:1;
	field:int orig_cpu;	offset:32;	size:4;	signed:1;
	field:int dest_cpu;	offset:36;	size:4;	signed:1;
)";

TEST(TraceFormat, FieldsAreReadFromEitherLayout) {
  for (const char* text : {kMigrate618, kMigrate61}) {
    const auto f = parse_trace_format(text);
    ASSERT_TRUE(f.has_value());
    const TraceField* comm = f->field("comm");
    const TraceField* pid = f->field("pid");
    const TraceField* dest = f->field("dest_cpu");
    ASSERT_TRUE(comm && pid && dest && f->field("common_type"));
    EXPECT_EQ(f->field("nothing"), nullptr);
    // A record of each layout: pid -7 (signed), dest_cpu 3, comm "worker".
    uint8_t rec[64] = {};
    const int32_t p = -7, d = 3;
    std::memcpy(rec + pid->offset, &p, 4);
    std::memcpy(rec + dest->offset, &d, 4);
    if (comm->data_loc) {
      const uint32_t loc = (7u << 16) | 40u;  // 7 bytes at offset 40
      std::memcpy(rec + comm->offset, &loc, 4);
      std::memcpy(rec + 40, "worker", 7);
    } else {
      std::memcpy(rec + comm->offset, "worker", 7);
    }
    EXPECT_EQ(trace_int(*pid, rec, sizeof rec), -7);
    EXPECT_EQ(trace_int(*dest, rec, sizeof rec), 3);
    EXPECT_EQ(trace_str(*comm, rec, sizeof rec), "worker");
    EXPECT_EQ(trace_int(*dest, rec, 20), 0);  // a field beyond a short record reads 0
  }
  EXPECT_EQ(parse_trace_format(kMigrate618)->id, 371);
  EXPECT_FALSE(parse_trace_format("name: x\nformat:\n").has_value());
}

TEST(IntervalsFile, RowsReadBackToTheNanosecond) {
  RunInterval r{101, 100, 1, 5 * kMs + 123456, 130 * kMs + 7};
  IntervalRow back;
  ASSERT_TRUE(parse_interval_row(run_row(r, "say \"a,b\"", 1 * kMs), &back));
  EXPECT_EQ(back.kind, "run");
  EXPECT_EQ(back.tid, 101);
  EXPECT_EQ(back.name, "say \"a,b\"");
  EXPECT_EQ(back.cpu, 1);
  EXPECT_EQ(back.start_ns, 4 * kMs + 123456);
  EXPECT_EQ(back.end_ns, 129 * kMs + 7);
  WaitPiece w;
  w.tid = 101;
  w.pid = 100;
  w.name = "omp";
  w.cpu = 0;
  w.start_ns = 2 * kMs;
  w.end_ns = 3 * kMs;
  w.holder_tid = 7;
  w.holder_pid = 7;
  w.holder_name = "cc1plus";
  w.holder = Holder::kOther;
  EXPECT_EQ(wait_row(w, 0), "wait,101,100,omp,0,2000.000,3000.000,7,7,cc1plus,other\n");
  w.caused = true;
  ASSERT_TRUE(parse_interval_row(wait_row(w, 0), &back));
  EXPECT_EQ(back.kind, "caused");
  EXPECT_EQ(back.holder_name, "cc1plus");
  EXPECT_FALSE(parse_interval_row(kIntervalsColumns, &back));
  EXPECT_FALSE(parse_interval_row("run,1,2,\"open,0,1.0,2.0,,,,", &back));
}

TEST(Binner, BinsHoldTheExactCpuOfEachInterval) {
  // 5 ms bins from t = 10 ms; a thread on a CPU from 12.5 to 22.5 ms.
  Binner b(10 * kMs, 5 * kMs, 0);
  b.thread(7, "spin", 10 * kMs, ThreadChange::kKnown);
  b.run(7, 12 * kMs + 500000, 22 * kMs + 500000);
  b.run(7, 12 * kMs + 500000, 22 * kMs + 500000);  // the same again (flushed open, then closed): counted once
  const auto rows = b.take(25 * kMs);
  std::vector<double> cores;
  for (const auto& r : rows) {
    if (r.tid == 7) cores.push_back(r.cores);
  }
  ASSERT_EQ(cores.size(), 3u);
  EXPECT_DOUBLE_EQ(cores[0], 0.5);
  EXPECT_DOUBLE_EQ(cores[1], 1.0);
  EXPECT_DOUBLE_EQ(cores[2], 0.5);
  // CPU for a closed bin lands in the first open one, counted as late.
  b.run(8, 20 * kMs, 26 * kMs);
  const auto last = b.finish(27 * kMs);
  ASSERT_EQ(last.size(), 2u);  // the process row and thread 8's
  EXPECT_DOUBLE_EQ(last[1].cpu_ms, 6.0);
  EXPECT_DOUBLE_EQ(last[1].dt_ms, 2.0);
  EXPECT_EQ(b.late_ns(), 5 * kMs);
}

TEST(Binner, ARenameSplitsTheCpuOfAnIntervalBetweenBothNames) {
  // An exec at 4 ms while the thread runs from 2 to 6 ms.
  Binner b(0, 10 * kMs, 0);
  b.thread(5, "threadburn_moni", 0, ThreadChange::kKnown);
  b.thread(5, "spin_child", 4 * kMs, ThreadChange::kRenamed);
  b.run(5, 2 * kMs, 6 * kMs);
  const auto rows = b.take(10 * kMs);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].cpu_ms, 4.0);  // the process
  EXPECT_EQ(rows[1].name, "spin_child");
  EXPECT_EQ(rows[1].change, "renamed");
  EXPECT_DOUBLE_EQ(rows[1].cpu_ms, 2.0);
  EXPECT_EQ(rows[2].name, "threadburn_moni");
  EXPECT_DOUBLE_EQ(rows[2].cpu_ms, 2.0);
}

TEST(Gaps, BurnWaitAndTailAfterEachSleepOfTheMainThread) {
  // The main thread sleeps 100..400 ms and 500..500.5 ms (under the 1 ms
  // threshold); a worker spins 90..223 ms, waits 223..225, runs 225..230.
  auto row = [](const char* kind, pid_t tid, int64_t a, int64_t b) {
    IntervalRow r;
    r.kind = kind;
    r.tid = tid;
    r.pid = 1;
    r.name = tid == 1 ? "main" : "worker";
    r.start_ns = a;
    r.end_ns = b;
    return r;
  };
  const std::vector<IntervalRow> rows = {row("sleep", 1, 100 * kMs, 400 * kMs), row("sleep", 1, 500 * kMs, 500 * kMs + 500000),
                                         row("run", 2, 90 * kMs, 223 * kMs), row("wait", 2, 223 * kMs, 225 * kMs),
                                         row("run", 2, 225 * kMs, 230 * kMs), row("run", 1, 400 * kMs, 401 * kMs)};
  GapFinder finder(1, 1 * kMs, 600 * kMs);
  for (const auto& r : rows) finder.add(r);
  GapBurns burns(finder.take(), 1);
  for (const auto& r : rows) burns.add(r);
  ASSERT_EQ(burns.gaps().size(), 1u);
  const Gap& g = burns.gaps()[0];
  ASSERT_EQ(g.threads.count(2), 1u);
  EXPECT_EQ(g.threads.at(2).burn_ns, 128 * kMs);
  EXPECT_EQ(g.threads.at(2).wait_ns, 2 * kMs);
  EXPECT_EQ(g.threads.at(2).tail_ns, 130 * kMs);
  EXPECT_EQ(g.threads.count(1), 0u);  // the main thread is not its own burn
  const std::string csv = gaps_csv(burns.gaps(), 1, 1 * kMs);
  EXPECT_NE(csv.find("0,100.000,300.000,0,2,worker,128.000,2.000,130.000\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("0,100.000,300.000,0,0,[others],128.000,2.000,130.000\n"), std::string::npos) << csv;
}

TEST(Waits, ByHolderByClassAndCaused) {
  WaitTable t(100);
  WaitPiece w;
  w.tid = 101;
  w.pid = 100;
  w.name = "omp";
  w.start_ns = 0;
  w.end_ns = 3 * kMs;
  w.holder_tid = 7;
  w.holder_pid = 7;
  w.holder = Holder::kOther;
  t.add(w);
  w.start_ns = 5 * kMs;
  w.end_ns = 6 * kMs;
  w.holder_tid = 100;
  w.holder_pid = 100;
  w.holder = Holder::kSameProcess;
  t.add(w);
  // Another process's thread waited 4 ms while the tree's 101 held its CPU.
  WaitPiece c;
  c.tid = 7;
  c.pid = 7;
  c.name = "cc1plus";
  c.start_ns = 10 * kMs;
  c.end_ns = 14 * kMs;
  c.holder_tid = 101;
  c.holder_pid = 100;
  c.holder_name = "omp";
  c.holder = Holder::kTree;
  c.caused = true;
  t.add(c);
  const ThreadWaits sum = t.tree_total();
  EXPECT_EQ(sum.total_ns, 4 * kMs);
  EXPECT_EQ(sum.by_holder[static_cast<size_t>(Holder::kOther)], 3 * kMs);
  EXPECT_EQ(sum.by_holder[static_cast<size_t>(Holder::kSameProcess)], 1 * kMs);
  EXPECT_EQ(sum.caused_ns, 4 * kMs);
  EXPECT_EQ(t.threads().at(101).caused_ns, 4 * kMs);
  EXPECT_EQ(t.caused_by_process().at(7).second, 4 * kMs);
  const std::string text = t.format(true);
  EXPECT_NE(text.find("[other threads]"), std::string::npos) << text;
  EXPECT_NE(text.find("pid 7 (cc1plus) 4.000 ms"), std::string::npos) << text;
  EXPECT_EQ(tree_class(100, 100, 100), TreeClass::kMain);
  EXPECT_EQ(tree_class(100, 101, 100), TreeClass::kThreads);
  EXPECT_EQ(tree_class(100, 400, 400), TreeClass::kChildren);
}

}  // namespace
}  // namespace threadburn::monitor
