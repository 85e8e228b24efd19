print("frametap: under construction")
