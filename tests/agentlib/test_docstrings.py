"""parse_docstring: a summary and per-parameter descriptions from Google, NumPy and Sphinx styles."""

from __future__ import annotations

import pytest

from ipyagent.agentlib.docstrings import parse_docstring


@pytest.mark.parametrize("doc", [None, "", "   \n\n  "])
def test_empty_docstrings(doc: str | None) -> None:
    assert parse_docstring(doc) == ("", {})


def test_a_plain_docstring_is_all_summary() -> None:
    doc = """
        Fetch a page.

        Follows redirects: at most five.
    """
    assert parse_docstring(doc) == ("Fetch a page.\n\nFollows redirects: at most five.", {})


# -- Google ---------------------------------------------------------------------------------------


def test_google_summary_and_parameters() -> None:
    doc = """Search the index.

    Matches are ranked by score.

    Args:
        query: What to look for.
        limit (int): How many results.
        exact (bool, optional): Match whole words only.
    """
    summary, params = parse_docstring(doc)
    assert summary == "Search the index.\n\nMatches are ranked by score."
    assert params == {
        "query": "What to look for.",
        "limit": "How many results.",
        "exact": "Match whole words only.",
    }


def test_google_multi_line_descriptions_are_joined() -> None:
    doc = """Resize.

    Args:
        width: The new width, in pixels. When larger
            than the original, the image is upscaled:
            expect blur.
        height:
            The new height.
    """
    assert parse_docstring(doc)[1] == {
        "width": (
            "The new width, in pixels. When larger than the original, the image is upscaled: expect blur."
        ),
        "height": "The new height.",
    }


def test_google_returns_and_raises_sections_do_not_leak_into_parameters() -> None:
    doc = """Divide.

    Args:
        a: The dividend.
        b: The divisor.

    Returns:
        result: The quotient.

    Raises:
        ZeroDivisionError: When b is zero.
    """
    summary, params = parse_docstring(doc)
    assert summary == "Divide."
    assert params == {"a": "The dividend.", "b": "The divisor."}


def test_google_star_args_lose_their_stars() -> None:
    doc = """Log.

    Arguments:
        *args: Values to log.
        **kwargs: Formatting options.
        level: Severity.
    """
    assert parse_docstring(doc)[1] == {
        "args": "Values to log.",
        "kwargs": "Formatting options.",
        "level": "Severity.",
    }


def test_google_sections_after_args_end_the_parameters() -> None:
    doc = """Sum.

    Args:
        xs: Numbers.

    Example:
        total: 3
    """
    assert parse_docstring(doc) == ("Sum.", {"xs": "Numbers."})


def test_google_is_detected_inside_a_method_docstring() -> None:
    class Shelf:
        def put(self, book: str) -> None:
            """Put a book on the shelf.

            Args:
                book: The book's title.
            """

    assert parse_docstring(Shelf.put.__doc__) == ("Put a book on the shelf.", {"book": "The book's title."})


# -- NumPy ---------------------------------------------------------------------------------------


def test_numpy_summary_and_parameters() -> None:
    doc = """Convolve two signals.

    Extended summary.

    Parameters
    ----------
    a : array_like
        First signal.
    v : array_like
        Second signal, which is
        usually shorter.
    mode : {'full', 'same'}, optional

    Returns
    -------
    out : ndarray
        The convolution.
    """
    summary, params = parse_docstring(doc)
    assert summary == "Convolve two signals.\n\nExtended summary."
    assert params == {"a": "First signal.", "v": "Second signal, which is usually shorter.", "mode": ""}


def test_numpy_star_args_and_untyped_names() -> None:
    doc = """Call.

    Parameters
    ----------
    func
        What to call.
    *args
        Its arguments.
    """
    assert parse_docstring(doc)[1] == {"func": "What to call.", "args": "Its arguments."}


def test_numpy_other_parameters_section_counts() -> None:
    doc = """Plot.

    Parameters
    ----------
    x : float
        Abscissa.

    Other Parameters
    ----------------
    color : str
        Line colour.

    See Also
    --------
    scatter : Points instead of lines.
    """
    assert parse_docstring(doc)[1] == {"x": "Abscissa.", "color": "Line colour."}


def test_numpy_parameters_sharing_one_line() -> None:
    # numpydoc allows "x1, x2 : type" for parameters described together.
    doc = """Add.

    Parameters
    ----------
    x1, x2 : float
        The addends.
    """
    assert parse_docstring(doc)[1] == {"x1": "The addends.", "x2": "The addends."}


# -- Sphinx --------------------------------------------------------------------------------------


def test_sphinx_params_with_and_without_types() -> None:
    doc = """Send a message.

    Delivery is best effort.

    :param to: The recipient.
    :param str body: What to say,
        in plain text.
    :type to: str
    :returns: Whether it was queued.
    :rtype: bool
    """
    summary, params = parse_docstring(doc)
    assert summary == "Send a message.\n\nDelivery is best effort."
    assert params == {"to": "The recipient.", "body": "What to say, in plain text."}


def test_sphinx_fields_after_a_param_do_not_extend_it() -> None:
    doc = """Open.

    :param path: Where.
    :raises OSError: when missing
        or unreadable.
    """
    assert parse_docstring(doc)[1] == {"path": "Where."}
