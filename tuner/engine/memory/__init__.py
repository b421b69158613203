"""Where experts live and how they move: the device arena and its rows, the host copy (the
RAM store), the disk store's readers (threads, KvikIO), the CPU and link sites, and the
checks of what was read."""
