"""Large-vocabulary detection AP (AP^Old, AP^Fixed, AP^Pool), exact against lvis-api / pycocotools.

One module per phase of the evaluation; every public name is re-exported here, so
``from vistabench.metrics.detection import evaluate_detections, GroundTruth, ...`` is the one import
other packages use (numpy only; pycocotools is imported for masks only).

==================  =====================================================================
module              public names
==================  =====================================================================
:mod:`.data`        ``GroundTruth``, ``Detections``, ``FREQUENCIES``, ``GtFormat``
:mod:`.params`      ``IOU_THRESHOLDS``, ``RECALL_THRESHOLDS``, ``AREA_RANGES``, ``AREA_LABELS``,
                    ``COCO_MAX_DETS``, ``LVIS_MAX_DETS``, ``KEYPOINT_AREA_RANGES``,
                    ``KEYPOINT_AREA_LABELS``, ``KEYPOINT_MAX_DETS``, ``IouType``
:mod:`.sort`        ``ScoreRank``, ``score_key``, ``score_order``, ``score_order_keys``,
                    ``stable_by``, ``stable_by_keys``, ``dense_rank_sorted``, ``group_ranks``,
                    ``member``, ``sorted_unique``
:mod:`.masks`       ``check_segmentations``, ``decode_rle_counts``, ``to_rle``,
                    ``MIN_POLYGON_NUMBERS``, ``MAX_POLYGON_COORDINATE``, ``MAX_CODE_GROUPS``
:mod:`.oks`         ``COCO_KPT_OKS_SIGMAS``, ``check_sigmas``, ``keypoint_array``,
                    ``keypoint_extent``, ``oks_area``, ``oks_pairs``, ``oks_matrix`` (keypoint OKS)
:mod:`.select`      ``rank_within``, ``top_mask``, ``top_per_image``, ``top_per_class``,
                    ``first_per_class``, ``federated_selection``, ``lvis_area_filter``, ``canonical_order``
:mod:`.match`       ``MatchCode``, ``Matching``, ``box_iou_pairs``, ``match_detections``,
                    ``MatchedSet``, ``match_set``
:mod:`.accumulate`  ``recall_counts``, ``PRCurves``, ``pr_curves``, ``Accumulation``,
                    ``PooledAccumulation``, ``accumulate``, ``accumulate_pooled``
:mod:`.summarize`   ``summarize``, ``summarize_pooled``, ``summarize_keypoints``, ``KEYPOINT_STATS``
:mod:`.evaluate`    ``evaluate_detections``, ``EvaluationOptions``, ``DetectionEvaluation``, ``Variant``, ``VARIANTS``,
                    ``POOL_KEYS``, ``OfficialToolsDifferenceWarning``, ``warn_annotation_id_zero``
:mod:`.labels`      ``detection_labels``, ``DetectionLabels`` (calibration labels)
:mod:`.errors`      ``classify_errors``, ``ErrorLabels``, ``ERROR_TYPES``, ``SPECIAL_ERROR_TYPES``,
                    ``MatchRules`` (TIDE's error of each detection)
:mod:`.error_fixes` ``decompose_errors``, ``ErrorDecomposition``, ``ERROR_VARIANTS``,
                    ``TIDE_MAX_DETS``, ``TIDE_RECALL_THRESHOLDS`` (ΔAP per fix)
:mod:`.per_class`   ``per_class_results``, ``PerClassResults``, ``variant_match``, ``PER_CLASS_VARIANTS``
:mod:`.operating`   ``ranked_outcomes``, ``RankedOutcomes``, ``operating_points``, ``confusion_matrix``
==================  =====================================================================
"""

from .accumulate import (
                         Accumulation,
                         PooledAccumulation,
                         PRCurves,
                         accumulate,
                         accumulate_pooled,
                         pr_curves,
                         recall_counts,
)
from .box_format import EDGE_SLACK, MIN_BOXES, outside_fraction, warn_if_corner_boxes
from .data import FREQUENCIES, Detections, GroundTruth, GtFormat
from .error_fixes import ERROR_VARIANTS, TIDE_MAX_DETS, TIDE_RECALL_THRESHOLDS, ErrorDecomposition, decompose_errors
from .errors import ERROR_TYPES, SPECIAL_ERROR_TYPES, ErrorLabels, MatchRules, classify_errors
from ..detection_options import VARIANTS, EvaluationOptions, Variant
from .evaluate import (
                         POOL_KEYS,
                         DetectionEvaluation,
                         OfficialToolsDifferenceWarning,
                         evaluate_detections,
                         warn_annotation_id_zero,
)
from .labels import DetectionLabels, detection_labels
from .masks import (
                         MAX_CODE_GROUPS,
                         MIN_POLYGON_NUMBERS, MAX_POLYGON_COORDINATE,
                         check_segmentations,
                         decode_rle_counts,
                         to_rle,
                         warn_other_size,
)
from .match import (
                         MatchCode,
                         MatchedSet,
                         Matching,
                         box_iou_pairs,
                         match_detections,
                         match_set,
)
from .oks import COCO_KPT_OKS_SIGMAS, check_sigmas, keypoint_array, keypoint_extent, oks_area, oks_matrix, oks_pairs
from .operating import RankedOutcomes, confusion_matrix, operating_points, ranked_outcomes
from .per_class import PER_CLASS_VARIANTS, PerClassResults, per_class_results, variant_match
from .params import (
                         AREA_LABELS,
                         AREA_RANGES,
                         COCO_MAX_DETS,
                         IOU_THRESHOLDS,
                         KEYPOINT_AREA_LABELS,
                         KEYPOINT_AREA_RANGES,
                         KEYPOINT_MAX_DETS,
                         LVIS_MAX_DETS,
                         RECALL_THRESHOLDS,
                         IouType,
)
from .select import (
                         canonical_order,
                         federated_selection,
                         first_per_class,
                         lvis_area_filter,
                         rank_within,
                         top_mask,
                         top_per_class,
                         top_per_image,
)
from .sort import (
                         ScoreRank,
                         dense_rank_sorted,
                         group_ranks,
                         member,
                         score_key,
                         score_order,
                         score_order_keys,
                         sorted_unique,
                         stable_by,
                         stable_by_keys,
)
from .summarize import KEYPOINT_STATS, summarize, summarize_keypoints, summarize_pooled

__all__ = [
                         "variant_match",
                         "ranked_outcomes",
                         "per_class_results",
                         "operating_points",
                         "confusion_matrix",
                         "RankedOutcomes",
                         "PerClassResults",
                         "PER_CLASS_VARIANTS",
                         "AREA_LABELS",
                         "AREA_RANGES",
                         "COCO_KPT_OKS_SIGMAS",
                         "COCO_MAX_DETS",
                         "ERROR_TYPES",
                         "ERROR_VARIANTS",
                         "FREQUENCIES",
                         "IOU_THRESHOLDS",
                         "KEYPOINT_AREA_LABELS",
                         "KEYPOINT_AREA_RANGES",
                         "KEYPOINT_MAX_DETS",
                         "KEYPOINT_STATS",
                         "LVIS_MAX_DETS",
                         "MAX_CODE_GROUPS",
                         "MIN_POLYGON_NUMBERS", "MAX_POLYGON_COORDINATE",
                         "POOL_KEYS",
                         "RECALL_THRESHOLDS",
                         "SPECIAL_ERROR_TYPES",
                         "TIDE_MAX_DETS",
                         "TIDE_RECALL_THRESHOLDS",
                         "VARIANTS",
                         "Accumulation",
                         "DetectionEvaluation",
                         "DetectionLabels",
                         "ErrorDecomposition",
                         "ErrorLabels",
                         "Detections",
                         "GroundTruth",
                         "GtFormat",
                         "IouType",
                         "MatchCode",
                         "MatchRules",
                         "MatchedSet",
                         "Matching",
                         "OfficialToolsDifferenceWarning",
                         "PRCurves",
                         "PooledAccumulation",
                         "ScoreRank",
                         "Variant",
                         "accumulate",
                         "accumulate_pooled",
                         "box_iou_pairs",
                         "canonical_order",
                         "check_sigmas",
                         "check_segmentations", "warn_other_size", "EDGE_SLACK", "MIN_BOXES", "outside_fraction",
                         "warn_if_corner_boxes",
                         "classify_errors",
                         "decode_rle_counts",
                         "decompose_errors",
                         "dense_rank_sorted",
                         "detection_labels",
                         "evaluate_detections",
                         "EvaluationOptions",
                         "federated_selection",
                         "group_ranks",
                         "keypoint_array",
                         "keypoint_extent",
                         "lvis_area_filter",
                         "match_detections",
                         "match_set",
                         "member",
                         "oks_area",
                         "oks_matrix",
                         "oks_pairs",
                         "pr_curves",
                         "rank_within",
                         "recall_counts",
                         "score_key",
                         "score_order",
                         "score_order_keys",
                         "sorted_unique",
                         "stable_by",
                         "stable_by_keys",
                         "summarize",
                         "summarize_keypoints",
                         "summarize_pooled",
                         "to_rle",
                         "top_mask",
                         "top_per_class",
                         "first_per_class",
                         "top_per_image",
                         "warn_annotation_id_zero",
]
