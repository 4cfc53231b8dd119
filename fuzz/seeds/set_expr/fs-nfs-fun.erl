fun({Pid,DynVars})->
     {ok,Val} = ts_dynvars:lookup(tsung_userid,DynVars),
     {Id,Mod} = case list_to_integer(Val) of
        I when I > 128 -> {I,256};
        I when I > 64  -> {I,128};
        I when I > 32  -> {I,64};
        I              -> {I,32}
     end,
     case Id < 9 of
      true -> (abs(Id+8) rem Mod) +1;
      _ -> (abs(Id-9) rem Mod) +1
     end
   end.