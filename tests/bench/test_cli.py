#!/usr/bin/env python3
"""Bad input to the benchmark programs: one line on stderr naming the flag,
exit code 2, nothing run. Binaries come from TB_TRAIN_BENCH / TB_OPTIMIZER_BENCH."""
import os
import struct
import subprocess
import tempfile
import unittest

TRAIN = os.environ.get("TB_TRAIN_BENCH", "build/bench/train_step_bench")
OPTIM = os.environ.get("TB_OPTIMIZER_BENCH", "build/bench/optimizer_step_bench")


def run(prog, *args):
    p = subprocess.run([prog, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


class BadInput(unittest.TestCase):
    def assertOneLineError(self, prog, args, must_contain):
        code, out, err = run(prog, *args)
        self.assertEqual(code, 2, err)
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("error: ", lines[0])
        self.assertIn(must_contain, lines[0])
        self.assertNotIn("Benchmark", out)

    def test_batch_zero(self):
        self.assertOneLineError(TRAIN, ["--batch=0"], "--batch: expected an integer in [1, 65536], got 0")

    def test_unknown_model(self):
        self.assertOneLineError(TRAIN, ["--model=resnet50"], "--model: unknown value 'resnet50'")

    def test_unknown_flag(self):
        self.assertOneLineError(TRAIN, ["--batchsize=3"], "--batchsize: unknown flag")

    def test_malformed_list(self):
        self.assertOneLineError(OPTIM, ["--gap_ms=100,,300"], "--gap_ms:")

    def test_unknown_optimizer(self):
        self.assertOneLineError(OPTIM, ["--optimizer=adam"], "--optimizer: unknown value 'adam'")

    def test_bad_device(self):
        self.assertOneLineError(OPTIM, ["--device=tpu"], "--device: expected cpu, cuda or cuda:N")

    def test_missing_data_dir(self):
        self.assertOneLineError(TRAIN, ["--model=mnist_adadelta", "--data_dir=/nonexistent/mnist"],
                                "--data_dir: /nonexistent/mnist: no such directory")

    def test_truncated_mnist(self):
        with tempfile.TemporaryDirectory() as d:
            n, rows, cols = 10, 28, 28
            with open(os.path.join(d, "train-images-idx3-ubyte"), "wb") as f:
                f.write(struct.pack(">IIII", 2051, n, rows, cols) + bytes(n * rows * cols - 50))
            with open(os.path.join(d, "train-labels-idx1-ubyte"), "wb") as f:
                f.write(struct.pack(">II", 2049, n) + bytes(n))
            self.assertOneLineError(TRAIN, ["--model=mnist_adadelta", "--data_dir=" + d], "truncated")

    def test_wrong_magic_cifar(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "data_batch_1.bin"), "wb") as f:
                f.write(bytes([200]) + bytes(3072))  # label 200: not CIFAR-10
            self.assertOneLineError(TRAIN, ["--model=cifar_sgd", "--data_dir=" + d], "label byte above 9")

    def test_batch_larger_than_dataset(self):
        self.assertOneLineError(TRAIN, ["--model=cifar_sgd", "--synthetic_n=100", "--batch=200"],
                                "--batch: 200 is larger than the cifar_sgd dataset")

    def test_preload_with_workers(self):
        self.assertOneLineError(TRAIN, ["--preload=1", "--workers=2"], "--workers: must be 0 with --preload=1")

    def test_cuda_flag_on_cpu(self):
        self.assertOneLineError(TRAIN, ["--cuda_sync=spin"], "--cuda_sync: only with --device=cuda")
        self.assertOneLineError(TRAIN, ["--pin_memory=1"], "--pin_memory: only with --device=cuda")

    def test_unknown_cuda_policy(self):
        self.assertOneLineError(TRAIN, ["--device=cuda", "--cuda_sync=busy"], "--cuda_sync: unknown policy 'busy'")

    def test_cuda_without_gpu_skips(self):
        code, out, err = run(TRAIN, "--device=cuda:3", "--model=cifar_sgd", "--workers=0", "--gap_ms=0", "--steps=1")
        self.assertEqual(code, 0, err)
        self.assertIn("skipped:", out)

    def test_help(self):
        code, out, _ = run(TRAIN, "--help")
        self.assertEqual(code, 0)
        self.assertIn("--data_dir", out)
        self.assertIn("--gap_ms", out)


if __name__ == "__main__":
    unittest.main()
