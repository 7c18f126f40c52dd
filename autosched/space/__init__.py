"""Search spaces: knobs, sketch rules, rule-derived seeds and templates for CPU and GPU targets."""
