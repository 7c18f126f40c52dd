"""Lowering: from a schedule's state to the loop-nest IR (bound inference, CPU and GPU lowering, passes)."""
