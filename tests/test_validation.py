"""vistabench._validation: scalar arguments are checked by option()'s rules (check_value) at every
boundary, metrics and data included; one message format, field first."""

import numpy as np
import pytest

from vistabench.errors import InputError, InputTypeError


@pytest.mark.parametrize("call, message", [
    (lambda: __import__("vistabench.metrics.incremental", fromlist=["x"]).session_sizes_uniform(
        base_classes=0, way=5, num_sessions=3), r"^base_classes: expected a number > 0, got 0$"),
    (lambda: __import__("vistabench.metrics.incremental", fromlist=["x"]).gacc_compat(
        [[0.9]], base_classes=60, way=-5), r"^way: expected a number > 0, got -5$"),
    (lambda: __import__("vistabench.metrics.incremental", fromlist=["x"]).incremental_scores(
        [[0.9]], session_sizes=[60], num_alphas=1), r"^num_alphas: expected a number >= 2, got 1$"),
    (lambda: __import__("vistabench.metrics.incremental", fromlist=["x"]).corner_case_matrix(
        "lazy", num_sessions=0), r"^num_sessions: expected a number > 0, got 0$"),
    (lambda: __import__("vistabench.metrics.stream", fromlist=["x"]).task_error(
        [0], [[1.0, 0.0]], kind="multiclas"), r"^kind: expected one of multiclass, multilabel, got 'multiclas'; "
                                              r"did you mean 'multiclass' or 'multilabel'\?$"),
    (lambda: __import__("vistabench.metrics.stream", fromlist=["x"]).mean_average_precision(
        [[1]], [[0.5]], absent_labels="drop"), r"^absent_labels: expected one of "),
    (lambda: __import__("vistabench.data.smalldata_presets", fromlist=["x"]).get_preset(
        "cifair10", recipe="gme"), r"^recipe: expected one of gem, vistabench, got 'gme'; did you mean 'gem'\?$"),
    (lambda: __import__("vistabench.data.augment", fromlist=["x"]).Augmentation(shift=-1),
     r"^augmentation shift: expected a number >= 0, got -1$"),
    (lambda: __import__("vistabench.data.augment", fromlist=["x"]).Augmentation(min_scale=0),
     r"^augmentation min_scale: expected a number > 0 and <= 1, got 0.0$"),
])
def test_boundary_arguments_answer_in_the_option_format(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_a_wrong_kind_of_value_is_an_input_type_error_and_integers_are_coerced_as_in_a_config():
    from vistabench.metrics.incremental import session_sizes_uniform

    with pytest.raises(InputTypeError, match=r"^way: expected an integer, got 2.5$"):
        session_sizes_uniform(base_classes=60, way=2.5, num_sessions=3)
    # numpy integers (and a whole float) are the integer they hold, as a config field reads them
    assert session_sizes_uniform(base_classes=np.int64(60), way=5.0, num_sessions=3).tolist() == [60, 5, 5]
