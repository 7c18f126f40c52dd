"""Cost models that rank candidate schedules: the XGBoost ranker, a random baseline, and metrics."""

from autosched.cost_model.base import CostModel, hash_scores, sanitize_features
from autosched.cost_model.metrics import ndcg_at_k, pairwise_accuracy, top_k_recall
from autosched.cost_model.random_model import RandomModel
from autosched.cost_model.xgb_model import XGBModel

__all__ = [
    "CostModel",
    "RandomModel",
    "XGBModel",
    "hash_scores",
    "ndcg_at_k",
    "pairwise_accuracy",
    "sanitize_features",
    "top_k_recall",
]
