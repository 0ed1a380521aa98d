"""The exported code's ``class GraphedStep`` (a piece of ``pieces``, kept apart for its size):
the same capture, warm-up and fallbacks as ``cifarlab.core.graphs``, in plain PyTorch."""

GRAPHS = '''\
class GraphedStep:
    """CUDA_GRAPHS: the fast pipeline's whole training step (zero_grad, forward, loss, backward,
    SGD) captured once as a CUDA graph and replayed, as CIFAR Lab does (PyTorch's "CUDA Graphs"
    notes, whole-network capture). Calling it trains one step and returns the loss, or returns
    None where the step must run as the tutorial writes it: no CUDA GPU, the tutorial pipeline,
    a batch of another size (an epoch's last short batch: a replay needs the captured shape),
    or a capture that failed."""

    def __init__(self, net, criterion, optimizer, batch_size, fast, warmup=3):
        self.net, self.criterion, self.optimizer = net, criterion, optimizer
        self.batch_size, self.warmup, self.warm = batch_size, warmup, 0
        self.graph, self.short = None, set()
        self.active = device.type == 'cuda' and fast
        if not self.active:
            print('CUDA graphs: not used (%s); every step runs as written' %
                  ('no CUDA GPU' if device.type != 'cuda' else 'the tutorial pipeline'),
                  flush=True)
        else:
            self.stream = torch.cuda.Stream(device)  # warm-up and capture: a side stream

    def eager(self, inputs, labels):  # the tutorial's step
        self.optimizer.zero_grad()
        loss = self.criterion(self.net(inputs), labels)
        loss.backward()
        self.optimizer.step()
        return loss

    def __call__(self, inputs, labels):
        if not self.active:
            return None
        if len(labels) != self.batch_size:
            if len(labels) not in self.short:
                self.short.add(len(labels))
                print('CUDA graphs: a batch of %d runs as written' % len(labels), flush=True)
            return None
        current = torch.cuda.current_stream(device)
        if self.graph is None and self.warm < self.warmup:
            # warm-up: ordinary steps on the side stream (they make the momentum buffers and
            # pick the GPU's algorithms before the capture)
            self.warm += 1
            self.stream.wait_stream(current)
            with torch.cuda.stream(self.stream):
                loss = self.eager(inputs, labels)
            current.wait_stream(self.stream)
            return loss
        if self.graph is None and not self.capture(inputs, labels):
            return None
        self.static_inputs.copy_(inputs)  # the batch into the captured addresses
        self.static_labels.copy_(labels)
        self.graph.replay()  # no zero_grad needed: the replay rewrites the gradients
        return self.static_loss

    def capture(self, inputs, labels):
        graph = torch.cuda.CUDAGraph()
        try:
            self.static_inputs = torch.empty_like(inputs)
            self.static_labels = torch.empty_like(labels)
            self.stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(self.stream):
                self.optimizer.zero_grad(set_to_none=True)  # gradients from the graph's pool
                with torch.cuda.graph(graph, stream=self.stream):
                    loss = self.criterion(self.net(self.static_inputs), self.static_labels)
                    loss.backward()
                    self.optimizer.step()
            torch.cuda.current_stream(device).wait_stream(self.stream)
        except Exception as err:
            print('CUDA graphs: the step could not be captured (%s: %s); every step runs as '
                  'written' % (type(err).__name__, err), flush=True)
            self.active = False
            self.optimizer.zero_grad(set_to_none=True)
            return False
        # nothing ran during the capture: the replay that follows trains on this batch
        self.graph, self.static_loss = graph, loss.detach()
        print('CUDA graphs: the step was captured after %d warm-up steps' % self.warm, flush=True)
        return True
'''
