"""Tests for the four-part text protocol (arena.protocol)."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from arena.messages import ALL_TAGS, BuyerMessage, Decision, Offer, SellerMessage
from arena.protocol import (
    MAX_INDEX,
    MAX_MESSAGE_CHARS,
    REASONS,
    ProtocolError,
    format_price,
    parse,
    parse_buyer_message,
    parse_seller_message,
    render,
)

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PARSERS: dict[str, Callable[[str], SellerMessage | BuyerMessage]] = {
    "seller": parse_seller_message,
    "buyer": parse_buyer_message,
    "any": parse,
}


def seller_text(think="t", to="buyer 1", offer="none", say="s", nl="\n") -> str:
    return nl.join([f"THINK: {think}", f"TO: {to}", f"OFFER: {offer}", f"SAY: {say}"])


def buyer_text(think="t", decision="accept", offer="none", say="s", nl="\n") -> str:
    return nl.join([f"THINK: {think}", f"DECISION: {decision}", f"OFFER: {offer}", f"SAY: {say}"])


def reason_of(parser: Callable[[str], object], text: object) -> str:
    with pytest.raises(ProtocolError) as info:
        parser(text)  # type: ignore[arg-type]
    return info.value.reason


# --------------------------------------------------------------------------- strategies


def _constructible(text: str) -> bool:
    try:
        SellerMessage(to=0, offer=None, say=text, think=text)
    except ValueError:
        return False
    return True


# Texts a message can carry and the protocol can carry back unchanged: no control
# characters besides newline and tab, no carriage return, no surrounding whitespace.
_char = st.one_of(
    st.characters(exclude_categories=("Cs", "Cc")),
    st.sampled_from("\n\t ٣€\u2028\u00a0"),
)
_line = st.one_of(
    st.text(alphabet=_char, max_size=25),
    st.sampled_from(
        [
            "to: buyer 2 (lowercase is not a tag)",
            "THINK :spaced colon is not a tag",
            "PRICE: 12",
            "product 1 at 10",
            "    indented line",
            "",
            "OFFER none",
            "SAYING: hello",
        ]
    ),
)
texts = (
    st.one_of(
        st.text(alphabet=_char, max_size=60),
        st.lists(_line, max_size=5).map("\n".join),
    )
    .map(str.strip)
    .filter(_constructible)
)

prices = st.one_of(
    st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=10**9).map(float),
    st.sampled_from([0.0, 0.1, 1e-5, 5e-324, 41.5, 1e9, 999_999_999_999.9999]),
)
indices = st.integers(min_value=0, max_value=MAX_INDEX - 1)
offers = st.builds(Offer, product=indices, price=prices)

sellers = st.builds(SellerMessage, to=indices, offer=st.none() | offers, say=texts, think=texts)
buyers = st.one_of(
    st.builds(
        BuyerMessage, decision=st.just(Decision.COUNTER), offer=offers, say=texts, think=texts
    ),
    st.builds(
        BuyerMessage,
        decision=st.sampled_from([Decision.ACCEPT, Decision.REJECT]),
        offer=st.none(),
        say=texts,
        think=texts,
    ),
)

# Text that looks like the protocol, to reach the checks past the tag scan.
_values = st.one_of(
    st.sampled_from(
        [
            "buyer 3",
            "BUYER 0",
            "product 1 at 2.5",
            "none",
            "accept",
            "reject",
            "counter",
            "nan",
            "buyer -1",
            "product 1 at 10 at 12",
            "1e3",
            "",
            "٣",
            "product 0 at 0",
        ]
    ),
    st.text(max_size=15),
)
_tag_lines = st.builds(
    lambda indent, tag, sep, value: f"{indent}{tag}{sep}{value}",
    st.sampled_from(["", " ", "\t", "\u3000"]),
    st.sampled_from([*ALL_TAGS, "think", "Say", "PRICE"]),
    st.sampled_from([":", ": ", " :", ":\t"]),
    _values,
)
protocolish = st.builds(
    lambda lines, nl: nl.join(lines),
    st.lists(st.one_of(_tag_lines, st.text(max_size=10)), max_size=8),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
anything = st.one_of(
    st.text(),
    st.binary().map(lambda b: b.decode("utf-8", errors="replace")),
    st.text().map(lambda s: s[: len(s) // 2] + "\x00" + s[len(s) // 2 :]),
    st.text(alphabet=st.characters(min_codepoint=0x80)),
    protocolish,
)


# --------------------------------------------------------------------------- round trips


@FAST
@given(sellers)
@example(SellerMessage(0, Offer(0, 0.0)))
@example(SellerMessage(999_999, Offer(999_999, 999_999_999_999.9999), say="a\n\nb", think="x\ty"))
def test_seller_round_trip(message: SellerMessage) -> None:
    text = render(message)
    assert parse_seller_message(text) == message
    assert parse(text) == message
    assert render(parse(text)) == text


@FAST
@given(buyers)
@example(BuyerMessage(Decision.COUNTER, Offer(3, 5e-324)))
@example(BuyerMessage(Decision.REJECT, say="no"))
def test_buyer_round_trip(message: BuyerMessage) -> None:
    text = render(message)
    assert parse_buyer_message(text) == message
    assert parse(text) == message
    assert render(parse(text)) == text


@FAST
@given(prices)
def test_price_text_reads_back_exactly(price: float) -> None:
    text = format_price(price)
    assert float(text) == price
    assert "e" not in text.lower()
    assert not text.endswith(".") and not (("." in text) and text.endswith("0"))


def test_negative_zero_price_renders_as_zero() -> None:
    message = SellerMessage(1, Offer(0, -0.0))
    assert render(message).splitlines()[2] == "OFFER: product 0 at 0"
    assert parse(render(message)) == message


@pytest.mark.parametrize(
    ("price", "text"),
    [
        (41.5, "41.5"),
        (41.0, "41"),
        (0.0, "0"),
        (0.1, "0.1"),
        (1e-5, "0.00001"),
        (1e11, "100000000000"),
        (123456.789, "123456.789"),
    ],
)
def test_format_price_canonical_form(price: float, text: str) -> None:
    assert format_price(price) == text


def test_render_exact_layout() -> None:
    seller = SellerMessage(3, Offer(2, 41.5), say="Deal?", think="start high")
    assert render(seller) == (
        "THINK: start high\nTO: buyer 3\nOFFER: product 2 at 41.5\nSAY: Deal?"
    )
    talk = SellerMessage(0, None)
    assert render(talk) == "THINK:\nTO: buyer 0\nOFFER: none\nSAY:"
    counter = BuyerMessage(Decision.COUNTER, Offer(1, 30.0), say="30?", think="anchor")
    assert render(counter) == "THINK: anchor\nDECISION: counter\nOFFER: product 1 at 30\nSAY: 30?"
    assert render(BuyerMessage("accept")).splitlines()[1:3] == ["DECISION: accept", "OFFER: none"]


@FAST
@given(cents=st.integers(0, 10**9), product=st.integers(0, MAX_INDEX - 1))
def test_a_price_written_another_way_parses_to_the_same_message(cents: int, product: int) -> None:
    """``render(..., price=...)``: two decimals always, as the language-model teacher
    writes prices; the parser reads the same message."""
    message = SellerMessage(1, Offer(product, cents / 100), say="ok")
    text = render(message, price=lambda p: f"{p:.2f}")
    assert f"OFFER: product {product} at {cents // 100}.{cents % 100:02d}\n" in text
    assert parse_seller_message(text) == message
    assert render(message) == text.replace(f"{cents / 100:.2f}", format_price(cents / 100))


def test_messages_strip_outer_whitespace_so_they_render() -> None:
    msg = SellerMessage(0, None, say=" padded ", think="trailing\n")
    assert (msg.say, msg.think) == ("padded", "trailing")
    assert parse_seller_message(render(msg)) == msg


@pytest.mark.parametrize(
    "message",
    [
        SellerMessage(0, None, say="bell\x07"),
        SellerMessage(0, None, say="a\r\nb"),
        SellerMessage(0, None, say="a\rb"),
        SellerMessage(MAX_INDEX, None),
        SellerMessage(0, Offer(MAX_INDEX, 1.0)),
        SellerMessage(0, Offer(0, 1e12)),
        BuyerMessage(Decision.COUNTER, Offer(0, 1e20)),
        SellerMessage(0, None, say="x" * MAX_MESSAGE_CHARS),
    ],
)
def test_render_refuses_messages_without_exact_text(message) -> None:
    with pytest.raises(ProtocolError) as info:
        render(message)
    assert info.value.reason == "unrenderable"


def test_render_rejects_non_messages() -> None:
    with pytest.raises(TypeError):
        render("THINK: x")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- robustness


def _check_outcome(name: str, text: object) -> SellerMessage | BuyerMessage | ProtocolError:
    parser = PARSERS[name]
    try:
        result = parser(text)  # type: ignore[arg-type]
    except ProtocolError as err:
        assert err.reason in REASONS
        assert str(err) == f"{err.reason}: {err.detail}"
        return err
    except Exception as err:  # the property under test: nothing else may escape
        pytest.fail(f"{name} parser raised {type(err).__name__}: {err!r} for {text!r}")
    expected = {"seller": SellerMessage, "buyer": BuyerMessage}.get(
        name, (SellerMessage, BuyerMessage)
    )
    assert isinstance(result, expected)
    return result


@FAST
@given(anything)
@example("\x00")
@example("THINK: \ud800")
@example("TO: buyer " + "1" * 5000)
@example("THINK:\nTO: buyer 1\nOFFER: product " + "0" * 6000 + "1 at 1\nSAY:")
def test_parsers_return_a_message_or_raise_protocol_error(text: str) -> None:
    for name in PARSERS:
        _check_outcome(name, text)


@FAST
@given(protocolish)
def test_whatever_parses_renders_back_to_the_same_message(text: str) -> None:
    outcome = _check_outcome("any", text)
    if not isinstance(outcome, ProtocolError):
        assert parse(render(outcome)) == outcome


@FAST
@given(st.one_of(sellers, buyers), st.data())
def test_damaged_messages_never_escape_protocol_error(message, data) -> None:
    text = render(message)
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(max_size=5))
    for name in PARSERS:
        _check_outcome(name, text[:cut] + junk + text[cut + 1 :])


def test_seller_and_buyer_parsers_disagree_on_side() -> None:
    assert isinstance(_check_outcome("seller", seller_text()), SellerMessage)
    assert reason_of(parse_buyer_message, seller_text()) == "wrong_part"
    assert isinstance(_check_outcome("buyer", buyer_text()), BuyerMessage)
    assert reason_of(parse_seller_message, buyer_text()) == "wrong_part"


def test_five_megabytes_is_too_long() -> None:
    huge = "x" * 5_000_000
    wrapped = seller_text(say="y" * 5_000_000)
    for parser in PARSERS.values():
        assert reason_of(parser, huge) == "too_long"
        assert reason_of(parser, wrapped) == "too_long"
        assert reason_of(parser, "\x00" * 5_000_000) == "too_long"


def test_length_limit_is_inclusive() -> None:
    base = seller_text(say="")
    at_limit = base + "y" * (MAX_MESSAGE_CHARS - len(base))
    assert len(at_limit) == MAX_MESSAGE_CHARS
    assert parse(at_limit).say == "y" * (MAX_MESSAGE_CHARS - len(base))
    assert reason_of(parse, at_limit + "y") == "too_long"


@pytest.mark.parametrize("value", [None, b"THINK: x", 42, ["THINK:"], bytearray(b"x")])
@pytest.mark.parametrize("name", list(PARSERS))
def test_non_text_input(name: str, value: object) -> None:
    assert reason_of(PARSERS[name], value) == "not_text"


# --------------------------------------------------------------------------- reason table

SELLER = parse_seller_message
BUYER = parse_buyer_message

REASON_CASES: list[tuple[str, Callable[[str], object], str, str]] = [
    # (id, parser, text, reason)
    ("empty", parse, "", "empty"),
    ("blank", SELLER, "  \n\t\r\n ", "empty"),
    ("blank-buyer", BUYER, "\n\n", "empty"),
    ("garbage", parse, "I'll sell product 1 for 10 dollars", "missing_part"),
    ("garbage-seller", SELLER, "price: 10", "missing_part"),
    ("no-say", SELLER, "THINK: t\nTO: buyer 1\nOFFER: none", "missing_part"),
    ("no-think", BUYER, "DECISION: accept\nOFFER: none\nSAY: ok", "missing_part"),
    ("no-offer", BUYER, "THINK:\nDECISION: accept\nSAY: ok", "missing_part"),
    ("no-side", parse, "THINK: t\nOFFER: none\nSAY: s", "missing_part"),
    ("no-to", SELLER, "THINK: t\nOFFER: none\nSAY: s", "missing_part"),
    ("dup-offer", SELLER, seller_text() + "\nOFFER: product 1 at 3", "duplicate_part"),
    ("dup-think", BUYER, "THINK: a\n" + buyer_text(), "duplicate_part"),
    ("dup-to", parse, seller_text(say="x\nTO: buyer 2"), "duplicate_part"),
    ("say-before-offer", SELLER, "THINK:\nTO: buyer 1\nSAY: s\nOFFER: none", "wrong_order"),
    ("to-first", SELLER, "TO: buyer 1\nTHINK:\nOFFER: none\nSAY: s", "wrong_order"),
    ("decision-last", BUYER, "THINK:\nOFFER: none\nSAY: s\nDECISION: accept", "wrong_order"),
    ("decision-in-seller", SELLER, buyer_text(), "wrong_part"),
    ("to-in-buyer", BUYER, seller_text(), "wrong_part"),
    ("both-sides", parse, "THINK:\nTO: buyer 1\nDECISION: accept\nOFFER: none\nSAY:", "wrong_part"),
    ("stray-before-think", parse, "Sure! Here it is:\n" + seller_text(), "stray_text"),
    ("lowercase-tag", parse, "think: t\n" + seller_text(), "stray_text"),
    ("to-negative", SELLER, seller_text(to="buyer -1"), "bad_to"),
    ("to-fraction", SELLER, seller_text(to="buyer 3.5"), "bad_to"),
    ("to-unicode-digit", SELLER, seller_text(to="buyer ٣"), "bad_to"),
    ("to-fullwidth-digit", SELLER, seller_text(to="buyer ３"), "bad_to"),
    ("to-bare-number", SELLER, seller_text(to="3"), "bad_to"),
    ("to-seller", SELLER, seller_text(to="seller 3"), "bad_to"),
    ("to-glued", SELLER, seller_text(to="buyer3"), "bad_to"),
    ("to-extra", SELLER, seller_text(to="buyer 3 please"), "bad_to"),
    ("to-plus", SELLER, seller_text(to="buyer +3"), "bad_to"),
    ("to-too-big", SELLER, seller_text(to=f"buyer {MAX_INDEX}"), "bad_to"),
    ("to-huge", SELLER, seller_text(to="buyer " + "9" * 5000), "bad_to"),
    ("to-empty", SELLER, seller_text(to=""), "bad_to"),
    ("two-prices-and", SELLER, seller_text(offer="product 1 at 10 and 12"), "bad_offer"),
    ("two-prices-at", SELLER, seller_text(offer="product 1 at 10 at 12"), "bad_offer"),
    ("price-with-unit", SELLER, seller_text(offer="product 1 at 10 dollars"), "bad_offer"),
    ("space-thousands", SELLER, seller_text(offer="product 1 at 1 000"), "bad_offer"),
    ("for-instead-of-at", SELLER, seller_text(offer="product 1 for 10"), "bad_offer"),
    ("no-price", BUYER, buyer_text(decision="counter", offer="product 1 at"), "bad_offer"),
    ("no-product", SELLER, seller_text(offer="at 10"), "bad_offer"),
    ("product-negative", SELLER, seller_text(offer="product -1 at 10"), "bad_offer"),
    ("product-unicode", SELLER, seller_text(offer="product ٣ at 10"), "bad_offer"),
    ("product-too-big", SELLER, seller_text(offer=f"product {MAX_INDEX} at 1"), "bad_offer"),
    ("offer-multiline", SELLER, seller_text(offer="product 1\nat 10"), "bad_offer"),
    ("offer-word", SELLER, seller_text(offer="nothing"), "bad_offer"),
    ("offer-empty", SELLER, seller_text(offer=""), "bad_offer"),
    ("nan", SELLER, seller_text(offer="product 1 at nan"), "bad_price"),
    ("NaN", BUYER, buyer_text(decision="counter", offer="product 1 at NaN"), "bad_price"),
    ("inf", SELLER, seller_text(offer="product 1 at inf"), "bad_price"),
    ("Infinity", SELLER, seller_text(offer="product 1 at Infinity"), "bad_price"),
    ("negative", SELLER, seller_text(offer="product 1 at -5"), "bad_price"),
    ("plus", SELLER, seller_text(offer="product 1 at +5"), "bad_price"),
    ("exponent", SELLER, seller_text(offer="product 1 at 1e3"), "bad_price"),
    ("comma", SELLER, seller_text(offer="product 1 at 1,000"), "bad_price"),
    ("underscore", SELLER, seller_text(offer="product 1 at 1_000"), "bad_price"),
    ("dollar", SELLER, seller_text(offer="product 1 at $10"), "bad_price"),
    ("euro-suffix", SELLER, seller_text(offer="product 1 at 10€"), "bad_price"),
    ("arabic-digits", SELLER, seller_text(offer="product 1 at ١٠"), "bad_price"),
    ("fullwidth-digits", SELLER, seller_text(offer="product 1 at １０"), "bad_price"),
    ("trailing-point", SELLER, seller_text(offer="product 1 at 10."), "bad_price"),
    ("leading-point", SELLER, seller_text(offer="product 1 at .5"), "bad_price"),
    ("two-points", SELLER, seller_text(offer="product 1 at 1.2.3"), "bad_price"),
    ("hex", SELLER, seller_text(offer="product 1 at 0x10"), "bad_price"),
    ("13-digits", SELLER, seller_text(offer="product 1 at 1000000000000"), "bad_price"),
    ("13-digits-zeros", SELLER, seller_text(offer="product 1 at 0000000000001"), "bad_price"),
    (
        "rounds-to-limit",
        SELLER,
        seller_text(offer="product 1 at 999999999999.99999999"),
        "bad_price",
    ),
    ("decision-maybe", BUYER, buyer_text(decision="maybe"), "bad_decision"),
    ("decision-past", BUYER, buyer_text(decision="accepted"), "bad_decision"),
    ("decision-two", BUYER, buyer_text(decision="accept counter"), "bad_decision"),
    ("decision-empty", BUYER, buyer_text(decision=""), "bad_decision"),
    ("decision-fullwidth", BUYER, buyer_text(decision="ａccept"), "bad_decision"),
    ("counter-none", BUYER, buyer_text(decision="counter", offer="none"), "counter_without_offer"),
    (
        "counter-none-any",
        parse,
        buyer_text(decision="COUNTER", offer="None"),
        "counter_without_offer",
    ),
    (
        "accept-offer",
        BUYER,
        buyer_text(decision="accept", offer="product 1 at 10"),
        "offer_not_allowed",
    ),
    (
        "reject-offer",
        parse,
        buyer_text(decision="reject", offer="product 0 at 0"),
        "offer_not_allowed",
    ),
    ("nul", parse, seller_text(say="a\x00b"), "bad_character"),
    ("bell", SELLER, seller_text(think="\x07"), "bad_character"),
    ("escape", BUYER, buyer_text(say="\x1b[31mred"), "bad_character"),
    ("vertical-tab", parse, seller_text(say="a\x0bb"), "bad_character"),
    ("form-feed", parse, seller_text(say="a\x0cb"), "bad_character"),
    ("delete", parse, seller_text(say="a\x7fb"), "bad_character"),
    ("c1-next-line", parse, seller_text(say="a\x85b"), "bad_character"),
    ("lone-surrogate", parse, seller_text(say="a\ud800b"), "bad_character"),
    ("too-long", parse, "x" * (MAX_MESSAGE_CHARS + 1), "too_long"),
    # A line separator ends a line for the message classes but not for the parser.
    ("hidden-tag", parse, seller_text(think="a\u2028TO: buyer 2"), "invalid_message"),
    ("hidden-tag-say", BUYER, buyer_text(say="ok\u2029 SAY: more"), "invalid_message"),
]


@pytest.mark.parametrize(
    ("parser", "text", "reason"),
    [case[1:] for case in REASON_CASES],
    ids=[case[0] for case in REASON_CASES],
)
def test_reason_codes(parser, text: str, reason: str) -> None:
    assert reason_of(parser, text) == reason


def test_every_parse_reason_is_exercised_and_documented() -> None:
    import arena.protocol as protocol

    covered = {case[3] for case in REASON_CASES} | {"not_text", "unrenderable"}
    assert covered == set(REASONS)
    for reason in REASONS:
        assert f"``{reason}``" in (protocol.__doc__ or "")


def test_protocol_error_shape() -> None:
    err = ProtocolError("bad_price", "got nan")
    assert isinstance(err, ValueError)
    assert (err.reason, err.detail, str(err)) == ("bad_price", "got nan", "bad_price: got nan")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.reason, copy.detail, str(copy)) == ("bad_price", "got nan", "bad_price: got nan")
    with pytest.raises(ValueError, match="unknown"):
        ProtocolError("no_such_reason", "x")


# --------------------------------------------------------------------------- accepted variants


def test_whitespace_and_crlf_are_accepted() -> None:
    text = (
        "\r\n\r\n  THINK:   plan  \r\n\tTO:  buyer   7 \r\n"
        "OFFER:\tproduct  2   at 41.50 \r\n SAY: hi \r\n\r\n"
    )
    message = parse_seller_message(text)
    assert message == SellerMessage(7, Offer(2, 41.5), say="hi", think="plan")
    assert parse(text) == message


def test_lone_carriage_returns_end_lines() -> None:
    text = buyer_text(decision="counter", offer="product 0 at 9", say="a\rb", nl="\r")
    assert parse_buyer_message(text) == BuyerMessage(
        Decision.COUNTER, Offer(0, 9.0), say="a\nb", think="t"
    )


def test_multiline_think_and_say_are_kept() -> None:
    think = "line one\n\n  indented two\nto: lowercase is text"
    say = "Hello.\nOFFER none is just words\n  - bullet"
    message = parse(seller_text(think=think, say=say))
    assert message == SellerMessage(1, None, say=say, think=think)
    buyer = parse(buyer_text(think=think, say=say, decision="reject"))
    assert (buyer.think, buyer.say) == (think, say)


def test_keywords_are_case_insensitive_but_tags_are_not() -> None:
    assert parse(seller_text(to="BUYER 4", offer="Product 1 AT 2.25")) == SellerMessage(
        4, Offer(1, 2.25), say="s", think="t"
    )
    assert parse(seller_text(offer="NONE")).offer is None
    assert parse(buyer_text(decision="Reject")).decision is Decision.REJECT
    assert reason_of(parse, seller_text().replace("TO:", "To:")) == "missing_part"


def test_empty_values_and_no_space_after_colon() -> None:
    message = parse("THINK:\nTO:buyer 0\nOFFER:none\nSAY:")
    assert message == SellerMessage(0, None, say="", think="")


def test_leading_zeros_and_long_fractions() -> None:
    message = parse(seller_text(to="buyer " + "0" * 5000 + "7", offer="product 007 at 0041.50"))
    assert (message.to, message.offer) == (7, Offer(7, 41.5))
    fraction = parse(seller_text(offer="product 0 at 0." + "0" * 3000 + "1")).offer
    assert fraction == Offer(0, 0.0)
    assert parse(seller_text(offer="product 0 at 999999999999.99")).offer == Offer(
        0, 999999999999.99
    )


def test_price_reads_to_nearest_float() -> None:
    assert parse(seller_text(offer="product 1 at 0.1")).offer == Offer(1, 0.1)
    assert parse(seller_text(offer="product 1 at 41.50")).offer == Offer(1, 41.5)
