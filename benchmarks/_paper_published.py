"""Published numbers of Vovk & Petej (2014), Tables 1-3, for the five datasets we have.

Copied from /work/shared/paper/venn-abers-predictors.tex (tests/test_paper_bench.py
re-parses the .tex and checks every number here when the file is present).
Each tuple is (W, VA, SVA, DIR); ``INF`` is the paper's infinity.
"""

INF = float("inf")

PUBLISHED = {
    "MLE": {
        "Breast": {
            "J": (INF, 0.607, 0.642, INF),
            "JB": (0.581, 0.592, 0.636, INF),
            "LR": (0.584, 0.567, 0.586, INF),
            "NB": (0.663, 0.563, 0.551, INF),
            "NN": (0.774, 0.615, 0.738, INF),
            "SVM": (0.583, 0.568, 0.582, INF),
        },
        "Diabetes": {
            "J": (INF, 0.552, 0.635, INF),
            "JB": (0.504, 0.515, 0.561, INF),
            "LR": (0.492, 0.49, 0.491, INF),
            "NB": (0.753, 0.495, 0.508, INF),
            "NN": (0.536, 0.5, 0.519, INF),
            "SVM": (0.491, 0.497, 0.49, INF),
        },
        "Ionosphere": {
            "J": (INF, 0.383, 0.41, INF),
            "JB": (INF, 0.387, 0.251, INF),
            "LR": (INF, 0.387, 0.524, INF),
            "NB": (0.704, 0.262, 0.227, INF),
            "NN": (0.625, 0.427, 0.379, INF),
            "SVM": (0.359, 0.25, 0.333, INF),
        },
        "Labor": {
            "J": (INF, 0.503, 0.537, INF),
            "JB": (0.427, 0.427, 0.385, INF),
            "LR": (1.927, 0.687, 0.297, INF),
            "NB": (1.854, 0.41, 0.296, INF),
            "NN": (0.325, 0.56, 0.298, INF),
            "SVM": (3.643, 0.364, 0.287, INF),
        },
        "Vote": {
            "J": (INF, 0.134, 0.145, INF),
            "JB": (0.135, 0.159, 0.131, INF),
            "LR": (1.059, 0.188, 0.148, INF),
            "NB": (0.594, 0.218, 0.211, INF),
            "NN": (0.235, 0.229, 0.158, INF),
            "SVM": (0.125, 0.211, 0.121, INF),
        },
    },
    "RMSE": {
        "Breast": {
            "J": (0.472, 0.453, 0.463, 0.473),
            "JB": (0.443, 0.451, 0.46, 0.474),
            "LR": (0.442, 0.437, 0.444, 0.45),
            "NB": (0.449, 0.436, 0.427, 0.433),
            "NN": (0.485, 0.465, 0.491, 0.508),
            "SVM": (0.443, 0.431, 0.442, 0.447),
        },
        "Diabetes": {
            "J": (0.449, 0.431, 0.443, 0.449),
            "JB": (0.407, 0.415, 0.42, 0.427),
            "LR": (0.399, 0.401, 0.401, 0.402),
            "NB": (0.42, 0.406, 0.41, 0.413),
            "NN": (0.413, 0.408, 0.413, 0.417),
            "SVM": (0.399, 0.393, 0.4, 0.402),
        },
        "Ionosphere": {
            "J": (0.318, 0.355, 0.312, 0.318),
            "JB": (0.267, 0.356, 0.261, 0.267),
            "LR": (0.357, 0.363, 0.349, 0.361),
            "NB": (0.281, 0.273, 0.25, 0.251),
            "NN": (0.321, 0.378, 0.316, 0.333),
            "SVM": (0.312, 0.309, 0.312, 0.316),
        },
        "Labor": {
            "J": (0.407, 0.403, 0.402, 0.413),
            "JB": (0.361, 0.371, 0.339, 0.341),
            "LR": (0.294, 0.498, 0.287, 0.303),
            "NB": (0.256, 0.363, 0.284, 0.281),
            "NN": (0.279, 0.442, 0.293, 0.307),
            "SVM": (0.274, 0.358, 0.28, 0.283),
        },
        "Vote": {
            "J": (0.187, 0.186, 0.186, 0.187),
            "JB": (0.187, 0.206, 0.186, 0.188),
            "LR": (0.198, 0.233, 0.195, 0.203),
            "NB": (0.292, 0.257, 0.251, 0.25),
            "NN": (0.216, 0.271, 0.206, 0.227),
            "SVM": (0.183, 0.191, 0.185, 0.188),
        },
    },
}

RANKING = {
    # Table 3: the three best methods (best classifier in parentheses), log loss then square loss
    "Breast": ("SVA (NB), VA (NB), W (JB)", "SVA (NB), VA (SVM), DIR (NB)"),
    "Diabetes": ("VA (LR), SVA (SVM), W (SVM)", "VA (SVM), W (LR), SVA (SVM)"),
    "Ionosphere": ("SVA (NB), VA (SVM), W (SVM)", "SVA (NB), DIR (NB), W (JB)"),
    "Labor": ("SVA (SVM), W (NN), VA (SVM)", "W (NB), SVA (SVM), DIR (NB)"),
    "Vote": ("SVA (SVM), W (SVM), VA (J)", "W (SVM), SVA (SVM), VA (J)"),
}
