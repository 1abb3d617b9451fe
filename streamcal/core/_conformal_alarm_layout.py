"""Where each part of a conformal alarm is in its float64 array (``ConformalAlarm._k``).

As for the protector (``_protector_layout``): the parameters and the state of the alarm,
the bags of ranked scores included, live in one float64 array, so that a call passes numba
one array and two numbers.

======================  =====================================================
``k[N_CLASSES]``        K, the labels known (0 .. K - 1)
``k[N_RATES]``          R, the jump rates
``k[N_LABEL_BETS]``     E_L, the label part's betting functions
``k[N_SCORE_BETS]``     E_S, the score part's betting functions
``k[THRESHOLD]``        ln(1 / alpha)
``k[N]``                labels learned
``k[ALARM_AT]``         the label count when the alarm fired, -1 before
``k[LOG_LABEL]``        ln S_label
``k[LOG_SCORE]``        ln S_score
``k[LOG_S]``            ln S, S = (S_label + S_score) / 2
``k[LOW]``, ``k[LOW_AT]``  the least ln S so far and the label count where it was
``k[ONSET]``            LOW_AT when the alarm fired (the estimated onset), -1 before
``k[RNG]``              the xorshift32 state of the tie-breaking draws (1 .. 2^32 - 1)
``k[SEGMENT]``          labels with a score since the last restart (set-aside ones too)
``k[RESERVE_EVERY]``    every this many of those is set aside (0: none)
``k[SET_ASIDE]``        1 if the last label's score was set aside, else 0
``k[BAG_CAP]``          the length of a row of the bag array
``k[LAST_P_LABEL]``     the last label-part p-value
``k[LAST_P_SCORE]``     the last score-part p-value (-1: none, set aside or no score)
``k[HEAD:...]``         J (R); the label bets' kinds (E_L) and parameters (E_L); the
                        score bets' kinds (E_S) and parameters (E_S); the label part's
                        weights (R rows of E_L); then the label counts (K), the bag
                        sizes (K) and the score part's weights, one jumper per label
                        (K blocks of R rows of E_S); then the bags, K rows of BAG_CAP
======================  =====================================================
"""

(N_CLASSES, N_RATES, N_LABEL_BETS, N_SCORE_BETS, THRESHOLD, N, ALARM_AT, LOG_LABEL,
 LOG_SCORE, LOG_S, LOW, LOW_AT, ONSET, RNG, SEGMENT, RESERVE_EVERY, SET_ASIDE, BAG_CAP,
 LAST_P_LABEL, LAST_P_SCORE) = range(20)  # fmt: skip
HEAD = 20

# Betting function kinds: f(p) on [0, 1], non-negative, integrating to 1.
LINEAR = 0  # 1 + e (p - 1/2), e in [-2, 2]
LOW_TAIL = 1  # kappa p^(kappa - 1), kappa in (0, 1]: bets on small p-values
HIGH_TAIL = 2  # kappa (1 - p)^(kappa - 1): bets on large p-values
