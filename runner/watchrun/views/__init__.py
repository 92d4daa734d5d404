"""Read-side views built from the output dir: watcher lists, agent watch and transcript."""
