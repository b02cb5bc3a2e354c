#!/usr/bin/python3
"""A word-level language model trained as in PyTorch's word_language_model
example: an embedding, a two-layer LSTM, a linear decoder tied to nothing,
cross-entropy over the next word, truncated back-propagation through time
(--bptt words), gradient clipping at 0.25 and plain SGD at --lr, with the
hidden state carried (detached) from batch to batch. The corpus is made
here, so nothing is downloaded: a --vocab-word vocabulary whose next word
follows a fixed random Markov chain (seeded), --words long, batchified into
--batch-size columns as the example does.

Written the way such trainings are written, not for this project: it prints
the example's log line every --log-interval batches,

  | epoch   1 |    20/  285 batches | lr 20.00 | ms/batch  41.27 | loss  6.61

and nothing else per step. A figure for threadburn tune --metric: the
ms/batch of each log line (lower is better):

  threadburn tune --metric 'ms/batch +([0-9.]+)' --metric-better lower -- \
      /usr/bin/python3 examples/word_language_model.py --seconds 20
  threadburn tune --in-run --metric 'ms/batch +([0-9.]+)' --metric-better lower -- \
      /usr/bin/python3 examples/word_language_model.py --seconds 60

--seconds ends the training after that many seconds of batches (the end of
the epoch otherwise). Needs PyTorch (Debian 12: python3-torch).
"""
import argparse
import math
import time

import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, x, hidden):
        emb = self.drop(self.encoder(x))
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(self.drop(output)), hidden

    def init_hidden(self, bsz):
        w = next(self.parameters())
        return (w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid))


def corpus(words, vocab, seed):
    """A word stream whose next word follows a fixed random Markov chain of 8 successors a word."""
    g = torch.Generator().manual_seed(seed)
    succ = torch.randint(0, vocab, (vocab, 8), generator=g)
    pick = torch.randint(0, 8, (words,), generator=g)
    out = torch.empty(words, dtype=torch.long)
    w = 0
    for i in range(words):
        w = int(succ[w, pick[i]])
        out[i] = w
    return out


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data[:nbatch * bsz].view(bsz, -1).t().contiguous()


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--words", type=int, default=200000)
    ap.add_argument("--emsize", type=int, default=200)
    ap.add_argument("--nhid", type=int, default=200)
    ap.add_argument("--nlayers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=20.0)
    ap.add_argument("--clip", type=float, default=0.25)
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=35)
    ap.add_argument("--log-interval", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=0, help="stop after this many seconds of training (0: one epoch)")
    ap.add_argument("--seed", type=int, default=1111)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    train = batchify(corpus(a.words, a.vocab, a.seed), a.batch_size)
    model = RNNModel(a.vocab, a.emsize, a.nhid, a.nlayers)
    criterion = nn.CrossEntropyLoss()
    model.train()
    hidden = model.init_hidden(a.batch_size)
    nbatches = (train.size(0) - 1) // a.bptt
    total_loss, start, t0 = 0.0, time.time(), time.time()
    for batch, i in enumerate(range(0, train.size(0) - 1, a.bptt)):
        seq_len = min(a.bptt, train.size(0) - 1 - i)
        data, targets = train[i:i + seq_len], train[i + 1:i + 1 + seq_len].reshape(-1)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, a.vocab), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-a.lr)
        total_loss += loss.item()
        if batch % a.log_interval == 0 and batch > 0:
            cur_loss = total_loss / a.log_interval
            elapsed = time.time() - start
            print(f"| epoch   1 | {batch:5d}/{nbatches:5d} batches | lr {a.lr:02.2f} | "
                  f"ms/batch {elapsed * 1000 / a.log_interval:6.2f} | loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}")
            total_loss, start = 0.0, time.time()
            if a.seconds and time.time() - t0 >= a.seconds:
                break


if __name__ == "__main__":
    main()
