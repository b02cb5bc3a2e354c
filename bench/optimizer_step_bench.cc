// The pattern "sleep; optimizer.step() + zero_grad(); sleep": one optimizer
// step per iteration over a configurable number of parameters; the gap after
// it is where OpenMP workers keep spinning.
#include "program.h"
#include "workload/train.h"

namespace tb = threadburn;

int main(int argc, char** argv) {
  tb::bench::Program prog("optimizer_step_bench", "optimizer_step",
                          "Times optimizer.step() + zero_grad() and the CPU burned in the gap after it.", "0,300");
  prog.flags().add_choice_list("optimizer", "sgd,adadelta", tb::optimizer_kinds(),
                               "optimizers: sgd (momentum 0.9), adadelta (lr 1.0)");
  prog.flags().add_int_list("params", "4000000", 1, 2000000000, "parameter counts (floats)");
  int code = 0;
  if (!prog.parse(&argc, argv, &code)) return code;

  torch::Device device = torch::kCPU;
  try {
    device = tb::parse_device(prog.flags().text("device"));
  } catch (const std::exception& e) {
    return prog.fail(e);
  }
  tb::bench::AxisSpace space(device.is_cuda() ? "optimizer_step_cuda" : "optimizer_step");
  try {
    space.add_axis("optimizer", prog.flags().items("optimizer"));
    space.add_axis("params", prog.flags().integers("params"));
    space.add_axis("gap_ms", prog.gaps());
  } catch (const std::exception& e) {
    return prog.fail(e);
  }
  const tb::Availability where = tb::device_availability(device);
  const tb::bench::LoopOptions loop = prog.loop_options();
  return prog.run(space, [&](benchmark::State& state, const tb::bench::Point& p) {
    if (!where.ok) return tb::bench::skip(state, where.why);
    tb::OptimizerWorkload work(p.text("optimizer"), p.integer("params"), device);
    tb::bench::LoopOptions lo = loop;
    lo.gap_ms = p.integer("gap_ms");
    tb::bench::StepLoop(state, p.name(), lo).run([&] {
      work.step();
      return tb::StepFigures{};
    });
  }, tb::torch_context(device));
}
