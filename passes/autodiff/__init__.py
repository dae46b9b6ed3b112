"""The autodiff pass: activity analysis, forward mode, split reverse mode with a tape."""
