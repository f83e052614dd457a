"""The pages made from a hand-in: the summary at the top of each feedback page, formulas typeset as MathML, and
every page (feedback, the formgrader's, JupyterLab's) made safe after rendering, whichever renderer reads it.
(Not `feedback/`: that is nbgrader's folder of generated feedback, beside this package's code.)"""
