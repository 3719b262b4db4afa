"""Where a run runs: the executor (this machine, or a Ray cluster), the cluster's nodes, the node's side."""
