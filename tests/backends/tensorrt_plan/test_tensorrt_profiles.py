"""Optimization profiles: which profile a request's shapes fit, which profiles
an instance group may use (Triton's ``instance_group { profile }``), and the
largest batch they take. Pure logic, no fake needed."""

from __future__ import annotations

import pytest

from edgebox.backends.tensorrt.profiles import (
    Profile,
    ProfileNameError,
    ShapeRange,
    allowed_profiles,
    choose_profile,
    max_batch_size,
    no_profile_message,
)

SMALL = Profile(0, {"x": ShapeRange((1, 3, 32, 32), (1, 3, 32, 32), (4, 3, 64, 64))})
LARGE = Profile(1, {"x": ShapeRange((1, 3, 64, 64), (8, 3, 128, 128), (16, 3, 128, 128))})
PROFILES = [SMALL, LARGE]


def test_shape_range_takes_shapes_between_min_and_max_inclusive() -> None:
    shapes = SMALL.ranges["x"]
    assert shapes.contains((1, 3, 32, 32))
    assert shapes.contains((4, 3, 64, 64))
    assert not shapes.contains((5, 3, 64, 64))
    assert not shapes.contains((1, 3, 31, 32))
    assert not shapes.contains((1, 3, 32))


def test_first_allowed_profile_that_fits_is_chosen() -> None:
    assert choose_profile(PROFILES, {"x": (2, 3, 48, 48)}, [0, 1]) == 0
    assert choose_profile(PROFILES, {"x": (8, 3, 128, 128)}, [0, 1]) == 1
    assert choose_profile(PROFILES, {"x": (2, 3, 64, 64)}, [1, 0]) == 1


def test_active_profile_is_kept_while_the_request_fits_it() -> None:
    assert choose_profile(PROFILES, {"x": (2, 3, 64, 64)}, [0, 1], current=1) == 1
    assert choose_profile(PROFILES, {"x": (2, 3, 32, 32)}, [0, 1], current=1) == 0


def test_profiles_the_instance_may_not_use_are_never_chosen() -> None:
    assert choose_profile(PROFILES, {"x": (8, 3, 128, 128)}, [0]) is None
    assert choose_profile(PROFILES, {"x": (2, 3, 32, 32)}, [1], current=0) is None


def test_every_input_must_fit_the_same_profile() -> None:
    two_inputs = [
        Profile(0, {"a": ShapeRange((1, 4), (1, 4), (2, 4)), "b": ShapeRange((1,), (1,), (2,))}),
        Profile(1, {"a": ShapeRange((1, 4), (1, 4), (8, 4)), "b": ShapeRange((1,), (1,), (8,))}),
    ]
    assert choose_profile(two_inputs, {"a": (2, 4), "b": (2,)}, [0, 1]) == 0
    assert choose_profile(two_inputs, {"a": (2, 4), "b": (3,)}, [0, 1]) == 1


def test_no_profile_message_names_the_shapes_and_the_allowed_ranges() -> None:
    message = no_profile_message(PROFILES, {"x": (32, 3, 64, 64)}, [0, 1])
    assert message == (
        "no optimization profile of this instance accepts 'x' [32,3,64,64] "
        "(profile 0: 'x' [1,3,32,32]..[4,3,64,64]; profile 1: 'x' [1,3,64,64]..[16,3,128,128])"
    )


def test_instance_group_without_profiles_uses_profile_zero_as_triton_does() -> None:
    assert allowed_profiles([], 3) == [0]


def test_instance_group_profiles_are_indices_in_order_without_repeats() -> None:
    assert allowed_profiles(["2", "0", "2"], 3) == [2, 0]


@pytest.mark.parametrize("name", ["3", "-1", "large"])
def test_a_profile_the_engine_lacks_is_refused(name: str) -> None:
    with pytest.raises(ProfileNameError) as error:
        allowed_profiles(["0", name], 3)
    assert str(error.value) == (
        f"instance_group profile '{name}' is not a profile of the engine, which has 3 "
        '(use "0" to "2")'
    )


def test_max_batch_size_is_the_largest_batch_an_allowed_profile_takes() -> None:
    assert max_batch_size(PROFILES, [0]) == 4
    assert max_batch_size(PROFILES, [0, 1]) == 16
    two_inputs = Profile(
        0, {"a": ShapeRange((1, 4), (1, 4), (8, 4)), "b": ShapeRange((1,), (1,), (2,))}
    )
    assert max_batch_size([two_inputs], [0]) == 2


def test_an_input_without_dimensions_means_no_batching() -> None:
    scalar = Profile(0, {"a": ShapeRange((), (), ())})
    assert max_batch_size([scalar], [0]) == 0
